// The HTTP/1.1 of http/minimal: a minimal responder and a keep-alive client, as protocol state machines with no
// I/O in them. Every stack runs this same code and only does the reads and writes, so each request costs the same
// parsing everywhere.
//
// Client request:  GET / HTTP/1.1, Host, no body.
// Server response: 200 OK, Content-Type text/plain, Content-Length 13, body "Hello, World!" (Corosio's shape).
// The server parses the request line and every header (case-insensitive names, Content-Length and Connection
// honoured), answers each complete request in the order received, and refuses anything else. The client parses
// the status line and headers and takes the body by Content-Length. Each side then also compares the whole message
// with the one the other side sends, so a corrupted byte anywhere, a header value included, fails the run.
#pragma once

#include "../../harness/worker.hpp"

#include <cctype>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tern_bench::http {

inline constexpr std::string_view request_text = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
inline constexpr std::string_view body_text = "Hello, World!";
inline constexpr std::string_view response_text =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
static_assert(body_text.size() == 13);

inline constexpr std::size_t buffer_size = 4096;  // the largest head either side accepts

namespace detail {

inline bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

inline std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

[[noreturn]] inline void fail(const char* side, const std::string& what) {
    throw bench_failure(std::string(side) + ": bad HTTP message: " + what);
}

// The head of a message: its first line and its headers, up to the blank line.
struct head {
    std::string_view first_line;
    std::size_t content_length = 0;
    bool close = false;
    std::size_t size = 0;  // bytes up to and including the blank line
};

// Parses the head at the start of `data`; size == 0 when it is not complete yet.
inline head parse_head(std::string_view data, const char* side) {
    head h;
    std::size_t end = data.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (data.size() >= buffer_size) fail(side, "head larger than " + std::to_string(buffer_size) + " bytes");
        return h;
    }
    h.size = end + 4;
    std::size_t eol = data.find("\r\n");
    h.first_line = data.substr(0, eol);
    std::size_t pos = eol + 2;
    while (pos < end + 2) {
        std::size_t next = data.find("\r\n", pos);
        std::string_view line = data.substr(pos, next - pos);
        pos = next + 2;
        std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) fail(side, "header line without a name");
        std::string_view name = line.substr(0, colon);
        std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "Content-Length")) {
            std::size_t v = 0;
            if (value.empty()) fail(side, "empty Content-Length");
            for (char c : value) {
                if (c < '0' || c > '9') fail(side, "Content-Length is not a number");
                v = v * 10 + static_cast<std::size_t>(c - '0');
            }
            h.content_length = v;
        } else if (iequals(name, "Connection")) {
            h.close = iequals(value, "close");
        }
    }
    return h;
}

}  // namespace detail

// The server side of one connection.
class server_connection {
public:
    char* space() { return buf_ + len_; }
    std::size_t space_size() const { return buffer_size - len_; }

    // n bytes arrived in space(): appends one response to out() per complete request. Returns false when the
    // client asked to close.
    bool received(std::size_t n) {
        len_ += n;
        std::size_t pos = 0;
        bool keep = true;
        while (keep) {
            detail::head h = detail::parse_head(std::string_view(buf_ + pos, len_ - pos), "server");
            if (h.size == 0) break;
            if (h.first_line != "GET / HTTP/1.1")
                detail::fail("server", "request line '" + std::string(h.first_line) + "'");
            if (h.content_length != 0) detail::fail("server", "a GET with a body");
            if (std::string_view(buf_ + pos, h.size) != request_text) detail::fail("server", "request bytes differ");
            out_.insert(out_.end(), response_text.begin(), response_text.end());
            pos += h.size;
            keep = !h.close;
        }
        std::memmove(buf_, buf_ + pos, len_ - pos);
        len_ -= pos;
        return keep;
    }

    bool idle() const { return len_ == 0; }
    std::vector<char>& out() { return out_; }

private:
    char buf_[buffer_size];
    std::size_t len_ = 0;
    std::vector<char> out_;
};

// The client side of one keep-alive connection: one request in flight.
class client_connection {
public:
    static std::string_view request() { return request_text; }

    char* space() { return buf_ + len_; }
    std::size_t space_size() const { return buffer_size - len_; }

    // n bytes arrived in space(): true once the whole response is there (it is then verified and consumed).
    bool received(std::size_t n) {
        len_ += n;
        detail::head h = detail::parse_head(std::string_view(buf_, len_), "client");
        if (h.size == 0) return false;
        if (h.first_line != "HTTP/1.1 200 OK")
            detail::fail("client", "status line '" + std::string(h.first_line) + "'");
        if (h.content_length != body_text.size())
            detail::fail("client", "Content-Length " + std::to_string(h.content_length));
        if (h.close) detail::fail("client", "the server closes a keep-alive connection");
        std::size_t total = h.size + h.content_length;
        if (len_ < total) return false;
        if (len_ > total) detail::fail("client", "bytes after the response");
        if (std::string_view(buf_ + h.size, h.content_length) != body_text) detail::fail("client", "body");
        if (std::string_view(buf_, total) != response_text) detail::fail("client", "response bytes differ");
        len_ = 0;
        return true;
    }

private:
    char buf_[buffer_size];
    std::size_t len_ = 0;
};

}  // namespace tern_bench::http
