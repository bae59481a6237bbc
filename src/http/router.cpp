// Routes by method and path, and the request's view of its target (see tern/http/router.hpp, request.hpp).
#include "tern/http/router.hpp"

#include <algorithm>
#include <stdexcept>

namespace tern::http {

namespace {

// The segments of a path after its leading '/': "/a/b" -> a, b; "/" -> none; "/a/" -> a, "".
template <class F>
bool for_each_segment(std::string_view path, F&& f) {
  if (path.empty() || path.front() != '/') return false;
  path.remove_prefix(1);
  if (path.empty()) return true;
  for (;;) {
    // A loop rather than find(): segments are a few bytes, shorter than a call to memchr is worth.
    std::size_t slash = 0;
    while (slash < path.size() && path[slash] != '/') ++slash;
    if (!f(path.substr(0, slash))) return false;
    if (slash == path.size()) return true;
    path.remove_prefix(slash + 1);
  }
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// ---- request ----

request::request(const request_head& head, const net::endpoint& remote) noexcept : head_(&head), remote_(&remote) {
  std::string_view t = head.target;
  if (!t.empty() && t.front() != '/' && t.front() != '*') {
    // absolute form: scheme "://" authority path
    const std::size_t scheme = t.find("://");
    if (scheme != std::string_view::npos) {
      t.remove_prefix(scheme + 3);
      const std::size_t start = t.find_first_of("/?");
      t = start == std::string_view::npos ? std::string_view("/") : t.substr(start);
    }
  }
  const std::size_t q = t.find('?');
  path_ = t.substr(0, q);
  if (path_.empty()) path_ = "/";
  if (q != std::string_view::npos) query_ = t.substr(q + 1);
}

std::string_view request::param(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < param_count_; ++i) {
    if (params_.at[i].first == name) return params_.at[i].second;
  }
  return {};
}

bool percent_decode(std::string_view in, std::string& out, bool plus_as_space) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(plus_as_space && c == '+' ? ' ' : c);
    }
  }
  return true;
}

// ---- router ----

router::route& router::add_route(method m, std::string_view pattern) {
  route r;
  r.method = m;
  std::size_t captures = 0;
  const bool ok = for_each_segment(pattern, [&](std::string_view s) {
    segment seg;
    if (!s.empty() && s.front() == '{') {
      if (s.size() < 3 || s.back() != '}') return false;
      seg.text = std::string(s.substr(1, s.size() - 2));
      seg.capture = true;
      if (seg.text.find_first_of("{}") != std::string::npos) return false;
      for (const segment& other : r.segments) {
        if (other.capture && other.text == seg.text) return false;
      }
      ++captures;
    } else {
      if (s.find_first_of("{}") != std::string_view::npos) return false;
      seg.text = std::string(s);
    }
    r.segments.push_back(std::move(seg));
    return true;
  });
  if (!ok || captures > request::max_params) {
    throw std::invalid_argument("http::router: malformed pattern '" + std::string(pattern) + "'");
  }
  if (captures == 0) {
    r.literal = true;
    r.pattern = std::string(pattern);
  }
  routes_.push_back(std::move(r));
  return routes_.back();
}

router& router::add(method m, std::string_view pattern, handler h) {
  add_route(m, pattern).whole = std::move(h);
  return *this;
}

router& router::stream(method m, std::string_view pattern, stream_handler h) {
  add_route(m, pattern).streaming = std::move(h);
  return *this;
}

const router::route* router::match(request& req, int& status, std::string& allow) const {
  // A route matches when every segment does; among the matches of the method the most literal one wins: the one
  // with a literal at the first place where the two differ. Allow is only built for a 405, so that a match costs
  // no allocation.
  const std::string_view path = req.path();
  const auto matches = [path](const route& r) {
    if (r.literal) return path == r.pattern;
    std::size_t i = 0;
    return for_each_segment(path, [&](std::string_view s) {
             if (i == r.segments.size()) return false;
             const segment& seg = r.segments[i++];
             return seg.capture ? !s.empty() : s == seg.text;
           }) && i == r.segments.size();
  };
  const auto better = [](const route& a, const route* b) {
    if (b == nullptr) return true;
    for (std::size_t i = 0; i < a.segments.size(); ++i) {
      if (a.segments[i].capture != b->segments[i].capture) return !a.segments[i].capture;
    }
    return false;
  };
  // The method first: only the routes that may answer it are matched against the path; the others only when none
  // does (a 405 or a 404).
  const route* best = nullptr;
  const route* best_get = nullptr;  // HEAD's fallback
  for (const route& r : routes_) {
    if (r.method == req.method()) {
      if (r.literal) {
        // A route without captures is as literal as a route gets: none after it wins over it (a tie keeps the
        // first), so the first that matches is the answer, without a look at the routes after it.
        if (path != r.pattern) continue;
        best = &r;
        break;
      }
      if (matches(r) && better(r, best)) best = &r;
    } else if (r.method == method::get && req.method() == method::head) {
      if (matches(r) && better(r, best_get)) best_get = &r;
    }
  }
  if (best == nullptr) best = best_get;
  if (best == nullptr) {
    // No route of this method matches: any that matches is one of another method.
    const bool other_methods = std::any_of(routes_.begin(), routes_.end(), matches);
    status = other_methods ? status::method_not_allowed : status::not_found;
    allow.clear();
    for (const route& r : routes_) {
      const std::string_view name = to_string(r.method);
      if (name.empty() || !matches(r) || allow.find(name) != std::string::npos) continue;
      if (!allow.empty()) allow += ", ";
      allow += name;
      if (r.method == method::get && allow.find("HEAD") == std::string::npos) allow += ", HEAD";
    }
    return nullptr;
  }
  // The captures, in the order of the pattern.
  req.clear_params();
  if (best->literal) {
    status = status::ok;
    return best;
  }
  std::size_t i = 0, p = 0;
  for_each_segment(path, [&](std::string_view s) {
    const segment& seg = best->segments[i++];
    if (seg.capture) req.set_param(p++, seg.text, s);
    return true;
  });
  status = status::ok;
  return best;
}

}  // namespace tern::http
