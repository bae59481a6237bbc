// dispatch/post for asio/callbacks: 1000 handler chains; each handler counts itself and posts its successor.
#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::asio_impl {

namespace dispatch_asio_callbacks {  // this file's own (see bench/CMakeLists.txt)
namespace {

// A plain function object rather than a lambda: a handler has to name its own type to post its successor.
struct post_chain {
    asio::io_context* ctx;
    ops_meter* meter;
    void operator()() const {
        if (meter->tick()) asio::post(*ctx, *this);
    }
};

}  // namespace
}  // namespace dispatch_asio_callbacks

void dispatch_post_callbacks(session& s) {
    announce(s);
    asio::io_context ctx(concurrency_hint);
    ops_meter meter(s, "ops_per_s");
    constexpr int chains = 1000;
    for (int i = 0; i < chains; ++i) asio::post(ctx, dispatch_asio_callbacks::post_chain{&ctx, &meter});
    meter.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

}  // namespace tern_bench::asio_impl
