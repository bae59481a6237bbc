// The "other live timers" of timers/schedule_cancel for both Asio implementations: steady_timers each with a
// pending wait, so that every one of them occupies Asio's timer queue. They use plain completion handlers in both
// implementations: what they load is the queue, which is the same whatever kind of handler waits.
#pragma once

#include "../asio_setup.hpp"
#include "../../harness/meters.hpp"

#include <deque>

namespace tern_bench::asio_impl {

class background_timers {
public:
    background_timers(asio::io_context& ctx, std::size_t n) {
        for (auto d : background_timer_delays(n)) {
            timers_.emplace_back(ctx);
            timers_.back().expires_after(d);
            timers_.back().async_wait([this](const asio::error_code& ec) {
                expect(ec, asio::error::operation_aborted, "background timer");
                ++cancelled_;
            });
        }
    }

    // Cancels every wait; their handlers run on the next turns of the loop.
    void cancel_all() {
        for (auto& t : timers_) t.cancel();
    }

    // After the loop drained: every background wait must have completed as cancelled, none fired.
    void check_drained() const {
        if (cancelled_ != timers_.size())
            throw bench_failure("only " + std::to_string(cancelled_) + " of " + std::to_string(timers_.size()) +
                                " background timers completed");
    }

private:
    std::deque<asio::steady_timer> timers_;  // a deque never moves its elements, which pending waits rely on
    std::size_t cancelled_ = 0;
};

}  // namespace tern_bench::asio_impl
