// http/parse for http_parser/parser: nodejs http-parser 2.9 (Debian's libhttp-parser), callbacks recording what
// it reports (target, each field, the body) as views into the request bytes; the method and the Content-Length
// come from the parser's state when the head is complete. http_parser_init before each message, then one
// http_parser_execute over the whole request.
//
// http-parser may report a URL, a field name or value, or the body in several pieces (when they straddle two
// calls); the callbacks join pieces that are contiguous, which they always are within one buffer.
#include "parse_cases.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <http_parser.h>

#include <climits>
#include <vector>

namespace tern_bench::http_impl {

namespace http_http_parser_parse {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct recorded {
    std::string_view method;
    std::string_view target;
    std::vector<http_parse::field_view> fields;
    bool in_value = false;  // the last callback was a field value: a name callback starts a new field
    bool has_length = false;
    std::uint64_t content_length = 0;
    std::string_view body;
    bool finished = false;

    void clear() {
        target = {};
        fields.clear();
        in_value = false;
        has_length = false;
        body = {};
        finished = false;
    }
};

recorded& of(http_parser* p) { return *static_cast<recorded*>(p->data); }

std::string_view extend(std::string_view v, const char* at, std::size_t n) {
    if (v.empty()) return {at, n};
    return {v.data(), static_cast<std::size_t>(at + n - v.data())};
}

int on_url(http_parser* p, const char* at, std::size_t n) {
    of(p).target = extend(of(p).target, at, n);
    return 0;
}

int on_header_field(http_parser* p, const char* at, std::size_t n) {
    recorded& r = of(p);
    if (r.fields.empty() || r.in_value) {
        r.fields.push_back({std::string_view(at, n), {}});
        r.in_value = false;
    } else {
        r.fields.back().name = extend(r.fields.back().name, at, n);
    }
    return 0;
}

int on_header_value(http_parser* p, const char* at, std::size_t n) {
    recorded& r = of(p);
    if (r.fields.empty()) return 1;
    r.fields.back().value = extend(r.fields.back().value, at, n);
    r.in_value = true;
    return 0;
}

int on_headers_complete(http_parser* p) {
    recorded& r = of(p);
    r.method = http_method_str(static_cast<http_method>(p->method));
    if (p->flags & F_CHUNKED) return 1;  // no request of this scenario is chunked
    // content_length holds the field's value here (ULLONG_MAX without one); it counts down as the body arrives.
    r.has_length = p->content_length != ULLONG_MAX;
    r.content_length = r.has_length ? p->content_length : 0;
    return 0;
}

int on_body(http_parser* p, const char* at, std::size_t n) {
    of(p).body = extend(of(p).body, at, n);
    return 0;
}

int on_message_complete(http_parser* p) {
    of(p).finished = true;
    return 0;
}

const http_parser_settings settings = [] {
    http_parser_settings s{};
    s.on_url = on_url;
    s.on_header_field = on_header_field;
    s.on_header_value = on_header_value;
    s.on_headers_complete = on_headers_complete;
    s.on_body = on_body;
    s.on_message_complete = on_message_complete;
    return s;
}();

void parse_once(http_parser& p, recorded& r, const http_parse::request_case& c, bool all) {
    r.clear();
    http_parser_init(&p, HTTP_REQUEST);
    p.data = &r;
    std::size_t used = http_parser_execute(&p, &settings, c.text.data(), c.text.size());
    if (HTTP_PARSER_ERRNO(&p) != HPE_OK)
        throw bench_failure("http_parser/parser refused request=" + std::string(c.id) + ": " +
                            http_errno_description(HTTP_PARSER_ERRNO(&p)));
    if (used != c.text.size() || !r.finished)
        throw bench_failure("http_parser/parser did not take the whole request=" + std::string(c.id));
    if (all)
        http_parse::verify_all(c, r.method, r.target, r.fields, r.has_length, r.content_length, r.body);
    else
        http_parse::verify_quick(c, r.method, r.target, r.fields, r.has_length, r.content_length, r.body);
}

}  // namespace
}  // namespace http_http_parser_parse

void http_parse_http_parser(session& s) {
    const http_parse::request_case& c = http_parse::case_for(s);
    s.info("http_parser", std::to_string(HTTP_PARSER_VERSION_MAJOR) + "." + std::to_string(HTTP_PARSER_VERSION_MINOR) +
                              "." + std::to_string(HTTP_PARSER_VERSION_PATCH) + " (headers; the library says " +
                              std::to_string(http_parser_version() >> 16) + "." +
                              std::to_string((http_parser_version() >> 8) & 255) + "." +
                              std::to_string(http_parser_version() & 255) + ")");
    http_parser p;
    http_http_parser_parse::recorded r;
    r.fields.reserve(32);
    parse_once(p, r, c, true);
    ops_meter meter(s, "req_per_s");
    meter.start();
    do parse_once(p, r, c, false);
    while (meter.tick());
}

}  // namespace tern_bench::http_impl
