// Worker for the HTTP comparators: beast/parser and http_parser/parser (http/parse), beast/callbacks
// (http/minimal, http/ping_json, and Beast's WebSocket in ws/echo). Its own executable because it brings Boost and http-parser, which no other
// worker needs.
#include "../harness/worker.hpp"
#include "../scenarios/registry.hpp"

#include <array>

namespace {

using namespace tern_bench;
namespace h = tern_bench::http_impl;

constexpr std::array entries = {
    impl_entry{"http/parse", "beast/parser", h::http_parse_beast},
    impl_entry{"http/parse", "http_parser/parser", h::http_parse_http_parser},
    impl_entry{"http/minimal", "beast/callbacks", h::http_minimal_beast},
    impl_entry{"http/ping_json", "beast/callbacks", h::http_ping_json_beast},
    impl_entry{"ws/echo", "beast/callbacks", h::ws_echo_beast},
};

}  // namespace

int main(int argc, char** argv) { return worker_main(argc, argv, entries, "tern-bench-http"); }
