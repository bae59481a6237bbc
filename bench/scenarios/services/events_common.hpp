// services/events: what tern's event bus and Asio's posted handlers share, so that only the delivery differs.
//
// Four event types, one handler (sink) each. The publisher publishes the types in turn, round after round, and
// keeps at most `window` events in flight (published, not yet handled): it publishes until the window is full, then
// lets its loop run (tern: co_await yield; Asio: it re-posts itself) and looks again. Without the window a fast
// publisher would only measure how large the queues grow. Each sink checks that it receives its own type, in
// publish order, with the tag that belongs to the sequence number; the counters it keeps are compared with what
// was published after each phase.
#pragma once

#include "../../harness/worker.hpp"

#include <atomic>
#include <cstdint>
#include <string>

namespace tern_bench::services_events {

inline constexpr int event_types = 4;
inline constexpr std::uint64_t window = 1024;

// Events are small values: a sequence number per type and a tag derived from it and the type.
template <int K>
struct event {
    std::uint64_t sequence = 0;
    std::uint64_t tag = 0;
};

template <int K>
constexpr std::uint64_t tag_of(std::uint64_t sequence) {
    return (sequence * 0x9e3779b97f4a7c15ull) ^ (static_cast<std::uint64_t>(K + 1) << 56);
}

template <int K>
event<K> make_event(std::uint64_t sequence) {
    return {sequence, tag_of<K>(sequence)};
}

// Events handled by every sink together: written by the handlers' thread only, read by the publisher (release /
// acquire, so that a publisher that has seen the count also sees the sinks' counters).
class progress {
public:
    void handled_one() noexcept { handled_.store(handled_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
    std::uint64_t handled() const noexcept { return handled_.load(std::memory_order_acquire); }

private:
    alignas(64) std::atomic<std::uint64_t> handled_{0};
};

// The handler of one event type: checks every event and counts it. A mismatch is recorded, not thrown, because a
// handler runs on a loop (maybe another thread) where an exception would not end the run; the phase checks it.
template <int K>
class sink {
public:
    explicit sink(progress& p) : progress_(&p) {}

    void operator()(const event<K>& e) noexcept {
        if (e.sequence != next_ || e.tag != tag_of<K>(e.sequence)) ++errors_;
        next_ = e.sequence + 1;
        progress_->handled_one();
    }

    // After a phase that published up to sequence `expected_next` (exclusive) of this type: throws bench_failure
    // unless every event arrived, in order, intact.
    void verify(std::uint64_t expected_next) const {
        if (errors_ != 0)
            throw bench_failure("event type " + std::to_string(K) + ": " + std::to_string(errors_) +
                                " events out of order or with a wrong tag");
        if (next_ != expected_next)
            throw bench_failure("event type " + std::to_string(K) + ": handled up to sequence " +
                                std::to_string(next_) + ", published up to " + std::to_string(expected_next));
    }

private:
    progress* progress_;
    std::uint64_t next_ = 0;
    std::uint64_t errors_ = 0;
};

// The four sinks and their shared progress.
struct sinks {
    progress done;
    sink<0> s0{done};
    sink<1> s1{done};
    sink<2> s2{done};
    sink<3> s3{done};

    void verify(std::uint64_t rounds_so_far) const {
        s0.verify(rounds_so_far);
        s1.verify(rounds_so_far);
        s2.verify(rounds_so_far);
        s3.verify(rounds_so_far);
        if (done.handled() != rounds_so_far * event_types)
            throw bench_failure("handled " + std::to_string(done.handled()) + " events, published " +
                                std::to_string(rounds_so_far * event_types));
    }
};

// The events of one phase: n, a multiple of the type count (a round publishes each type once).
inline std::uint64_t rounds_per_phase(const session& s) {
    auto n = s.param_int("n");
    if (n <= 0 || n % event_types != 0)
        throw bench_failure("n must be a positive multiple of " + std::to_string(event_types));
    return static_cast<std::uint64_t>(n) / event_types;
}

}  // namespace tern_bench::services_events
