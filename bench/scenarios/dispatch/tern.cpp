// dispatch/post for tern: 1000 handler chains; each handler counts itself and posts its successor with
// io_context::post, the same shape as asio/callbacks.
#include "../tern_setup.hpp"
#include "../../harness/meters.hpp"
#include "../registry.hpp"

namespace tern_bench::tern_impl {

namespace dispatch_tern {  // this file's own (see bench/CMakeLists.txt)
namespace {

// A plain function object rather than a lambda: a handler has to name its own type to post its successor.
struct post_chain {
    tern::io_context* ctx;
    ops_meter* meter;
    void operator()() const {
        if (meter->tick()) ctx->post(*this);
    }
};

}  // namespace
}  // namespace dispatch_tern

void dispatch_post(session& s) {
    tern::io_context ctx(options_for(s));
    announce(s, ctx);
    ops_meter meter(s, "ops_per_s");
    constexpr int chains = 1000;
    for (int i = 0; i < chains; ++i) ctx.post(dispatch_tern::post_chain{&ctx, &meter});
    meter.start();
    ctx.run();
    if (!meter.done()) throw bench_failure("the loop ran out of work before the last phase ended");
}

}  // namespace tern_bench::tern_impl
