// Methods, reason phrases and bodiless responses (see tern/http/message.hpp).
#include "tern/http/message.hpp"

namespace tern::http {

std::string_view to_string(method m) noexcept {
  switch (m) {
    case method::get: return "GET";
    case method::head: return "HEAD";
    case method::post: return "POST";
    case method::put: return "PUT";
    case method::delete_: return "DELETE";
    case method::connect: return "CONNECT";
    case method::options: return "OPTIONS";
    case method::trace: return "TRACE";
    case method::patch: return "PATCH";
    case method::other: break;
  }
  return "";
}

method method_from(std::string_view t) noexcept {
  switch (t.size()) {
    case 3:
      if (t == "GET") return method::get;
      if (t == "PUT") return method::put;
      break;
    case 4:
      if (t == "POST") return method::post;
      if (t == "HEAD") return method::head;
      break;
    case 5:
      if (t == "PATCH") return method::patch;
      if (t == "TRACE") return method::trace;
      break;
    case 6:
      if (t == "DELETE") return method::delete_;
      break;
    case 7:
      if (t == "OPTIONS") return method::options;
      if (t == "CONNECT") return method::connect;
      break;
    default: break;
  }
  return method::other;
}

std::string_view reason_phrase(int s) noexcept {
  switch (s) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "";
  }
}

bool has_no_body(method request_method, int s) noexcept {
  if (request_method == method::head) return true;
  if (s < 200 || s == 204 || s == 304) return true;
  return request_method == method::connect && s < 300;
}

}  // namespace tern::http
