// http/parse for beast/parser: Boost.Beast's http::basic_parser<true>, with a derived class that records what
// the parser hands over (method, target, each field, the body) as views into the request bytes, as tern's parser
// and http-parser's callbacks do. request_parser<empty_body> would copy every field into an allocated
// basic_fields and refuse the ping's body, so the base parser is the like-for-like one.
//
// Beast's parsers are not reusable: one is constructed per message (it allocates nothing when constructed), and
// eager mode makes one put() parse the head and the body it holds.
#include "beast_setup.hpp"
#include "parse_cases.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

#include <boost/beast/http/basic_parser.hpp>

#include <optional>
#include <vector>

namespace tern_bench::http_impl {

namespace http = boost::beast::http;
using boost::beast::error_code;

namespace http_beast_parse {  // this file's own (see bench/CMakeLists.txt)
namespace {

struct recorded {
    std::string_view method;
    std::string_view target;
    std::vector<http_parse::field_view> fields;
    bool has_length = false;
    std::uint64_t content_length = 0;
    std::string_view body;
    bool finished = false;

    void clear() {
        fields.clear();
        has_length = false;
        body = {};
        finished = false;
    }
};

class recording_parser final : public http::basic_parser<true> {
public:
    explicit recording_parser(recorded& r) : r_(r) {}

private:
    void on_request_impl(http::verb, std::string_view method, std::string_view target, int, error_code&) override {
        r_.method = method;
        r_.target = target;
    }
    void on_response_impl(int, std::string_view, int, error_code& ec) override { ec = http::error::bad_method; }
    void on_field_impl(http::field, std::string_view name, std::string_view value, error_code&) override {
        r_.fields.push_back({name, value});
    }
    void on_header_impl(error_code&) override {}
    void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
        r_.has_length = length.has_value();
        r_.content_length = length.value_or(0);
    }
    std::size_t on_body_impl(std::string_view body, error_code&) override {
        // Eager parsing of a buffer holding the whole body hands it over in one piece; a second piece would
        // follow the first in the same buffer.
        r_.body = r_.body.empty() ? body : std::string_view(r_.body.data(), r_.body.size() + body.size());
        return body.size();
    }
    void on_chunk_header_impl(std::uint64_t, std::string_view, error_code& ec) override {
        ec = http::error::bad_transfer_encoding;  // no request of this scenario is chunked
    }
    std::size_t on_chunk_body_impl(std::uint64_t, std::string_view, error_code& ec) override {
        ec = http::error::bad_transfer_encoding;
        return 0;
    }
    void on_finish_impl(error_code&) override { r_.finished = true; }

    recorded& r_;
};

void parse_once(recorded& r, const http_parse::request_case& c, bool all) {
    r.clear();
    std::optional<recording_parser> p;
    p.emplace(r);
    p->eager(true);
    error_code ec;
    std::size_t used = p->put(boost::asio::const_buffer(c.text.data(), c.text.size()), ec);
    if (ec) throw bench_failure("beast/parser refused request=" + std::string(c.id) + ": " + ec.message());
    if (used != c.text.size() || !p->is_done() || !r.finished)
        throw bench_failure("beast/parser did not take the whole request=" + std::string(c.id));
    if (all)
        http_parse::verify_all(c, r.method, r.target, r.fields, r.has_length, r.content_length, r.body);
    else
        http_parse::verify_quick(c, r.method, r.target, r.fields, r.has_length, r.content_length, r.body);
}

}  // namespace
}  // namespace http_beast_parse

void http_parse_beast(session& s) {
    const http_parse::request_case& c = http_parse::case_for(s);
    http_beast_parse::recorded r;
    r.fields.reserve(32);
    parse_once(r, c, true);
    ops_meter meter(s, "req_per_s");
    meter.start();
    do parse_once(r, c, false);
    while (meter.tick());
}

}  // namespace tern_bench::http_impl
