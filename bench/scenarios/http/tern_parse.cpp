// http/parse for tern/parser: tern::http::request_parser, one parser reset before each message (its field list is
// reserved once, so the loop allocates nothing), the body taken by the framing the head announces.
#include "parse_cases.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <tern/http/parser.hpp>

#include <system_error>

namespace tern_bench::tern_impl {

namespace http_tern_parse {  // this file's own (see bench/CMakeLists.txt)
namespace {

// Parses c.text once and checks it; `all`: every field.
void parse_once(tern::http::request_parser& p, const http_parse::request_case& c, bool all) {
    p.reset();
    std::error_code ec;
    if (!p.parse(c.text, ec) || ec)
        throw bench_failure("tern/parser refused request=" + std::string(c.id) + ": " +
                            (ec ? ec.message() : std::string("head incomplete")));
    const tern::http::request_head& h = p.head();
    bool has_length = h.framing == tern::http::body_framing::content_length;
    if (!has_length && h.framing != tern::http::body_framing::none)
        throw bench_failure("tern/parser: unexpected body framing for request=" + std::string(c.id));
    std::string_view body;
    if (has_length) {
        if (c.text.size() - h.size < h.content_length) throw bench_failure("tern/parser: body beyond the data");
        body = c.text.substr(h.size, h.content_length);
    } else if (h.size != c.text.size()) {
        throw bench_failure("tern/parser: the head ends before the data does, and there is no body");
    }
    if (all)
        http_parse::verify_all(c, h.method_name, h.target, h.headers, has_length, h.content_length, body);
    else
        http_parse::verify_quick(c, h.method_name, h.target, h.headers, has_length, h.content_length, body);
}

}  // namespace
}  // namespace http_tern_parse

void http_parse(session& s) {
    const http_parse::request_case& c = http_parse::case_for(s);
    tern::http::request_parser p;
    http_tern_parse::parse_once(p, c, true);
    ops_meter meter(s, "req_per_s");
    meter.start();
    do http_tern_parse::parse_once(p, c, false);
    while (meter.tick());
}

}  // namespace tern_bench::tern_impl
