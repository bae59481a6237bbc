// The requests of http/parse and the check every parser's result goes through, shared by every implementation so
// that each one parses the same bytes and pays for the same verification.
//
// A parser reports what it extracted as views into the request bytes: method, target, the header fields in order,
// the body's framing (Content-Length or none) and the body. Two checks:
//   verify_all   every field's name and value, in order: run on the first parse of a run;
//   verify_quick method, target, field count, first and last field, framing and body: run on every parse, cheap
//                next to the parse itself, and enough that a parser which mislays a field, a boundary or the
//                body fails the run.
#pragma once

#include "../../harness/worker.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern_bench::http_parse {

struct field_view {
    std::string_view name;
    std::string_view value;
};

struct request_case {
    std::string_view id;  // the point's `request` parameter
    std::string_view text;
    std::string_view method;
    std::string_view target;
    std::vector<field_view> fields;
    bool has_length;  // framed by Content-Length (else no body)
    std::string_view body;
};

// A browser's GET as Firefox sends it for a page, with a session cookie: 321 bytes.
inline const request_case& get_case() {
    static const request_case c{
        "get",
        "GET /index.html HTTP/1.1\r\n"
        "Host: www.example.com\r\n"
        "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:109.0) Gecko/20100101 Firefox/115.0\r\n"
        "Accept: text/html,application/xhtml+xml,*/*;q=0.8\r\n"
        "Accept-Language: en-US,en;q=0.5\r\n"
        "Accept-Encoding: gzip, deflate, br\r\n"
        "Connection: keep-alive\r\n"
        "Cookie: session=5f2b8c1e9a7d; theme=dark\r\n"
        "\r\n",
        "GET",
        "/index.html",
        {{"Host", "www.example.com"},
         {"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:109.0) Gecko/20100101 Firefox/115.0"},
         {"Accept", "text/html,application/xhtml+xml,*/*;q=0.8"},
         {"Accept-Language", "en-US,en;q=0.5"},
         {"Accept-Encoding", "gzip, deflate, br"},
         {"Connection", "keep-alive"},
         {"Cookie", "session=5f2b8c1e9a7d; theme=dark"}},
        false,
        ""};
    return c;
}

// Ichor's ping request, as its wrk script sends it.
inline const request_case& ping_case() {
    static const request_case c{"ping",
                                "POST /ping HTTP/1.1\r\n"
                                "Host: 127.0.0.1:8001\r\n"
                                "Content-Type: application/json\r\n"
                                "Content-Length: 15\r\n"
                                "\r\n"
                                "{\"sequence\": 2}",
                                "POST",
                                "/ping",
                                {{"Host", "127.0.0.1:8001"},
                                 {"Content-Type", "application/json"},
                                 {"Content-Length", "15"}},
                                true,
                                "{\"sequence\": 2}"};
    return c;
}

// The case a session's `request` parameter names.
inline const request_case& case_for(const session& s) {
    auto it = s.request().params.find("request");
    std::string id = it == s.request().params.end() ? "" : it->second;
    if (id == "get") return get_case();
    if (id == "ping") return ping_case();
    throw bench_failure("http/parse: unknown request '" + id + "' (get or ping)");
}

[[noreturn]] inline void fail(const request_case& c, const std::string& what) {
    throw bench_failure("http/parse request=" + std::string(c.id) + ": the parser got " + what + " wrong");
}

// What a parser extracted: method, target, fields (any range with size() and operator[] giving .name and .value),
// whether the body is framed by a Content-Length and its value, and the body's bytes.
template <class Fields>
inline void verify_quick(const request_case& c, std::string_view method, std::string_view target,
                         const Fields& fields, bool has_length, std::uint64_t content_length, std::string_view body) {
    if (method != c.method) fail(c, "the method");
    if (target != c.target) fail(c, "the target");
    if (fields.size() != c.fields.size()) fail(c, "the number of fields");
    const auto& first = fields[0];
    const auto& last = fields[fields.size() - 1];
    if (first.name != c.fields.front().name || first.value != c.fields.front().value) fail(c, "the first field");
    if (last.name != c.fields.back().name || last.value != c.fields.back().value) fail(c, "the last field");
    if (has_length != c.has_length || (has_length && content_length != c.body.size())) fail(c, "the body's framing");
    if (body != c.body) fail(c, "the body");
}

template <class Fields>
inline void verify_all(const request_case& c, std::string_view method, std::string_view target, const Fields& fields,
                       bool has_length, std::uint64_t content_length, std::string_view body) {
    verify_quick(c, method, target, fields, has_length, content_length, body);
    for (std::size_t i = 0; i < c.fields.size(); ++i)
        if (fields[i].name != c.fields[i].name || fields[i].value != c.fields[i].value)
            fail(c, "field " + std::to_string(i) + " (" + std::string(c.fields[i].name) + ")");
}

}  // namespace tern_bench::http_parse
