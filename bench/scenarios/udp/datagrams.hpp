// The datagrams of udp/throughput, the same for every implementation: an 8-byte sequence number, then the bytes of
// payload_pattern's round of that number. The receiver checks every datagram (size, then content for its
// number) and counts the numbers it never saw: loopback UDP drops datagrams when the receiver falls behind, and a
// drop is a figure, not a failure. Numbers only grow (loopback keeps the order), so a smaller one is corruption.
#pragma once

#include "../../harness/meters.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace tern_bench {

// Both ends' socket buffers, set alike for every implementation.
inline constexpr int udp_buffer_bytes = 4 << 20;

class datagram_stream {
public:
    explicit datagram_stream(std::size_t size) : size_(size), pattern_(size) {
        if (size < sizeof(std::uint64_t)) throw bench_failure("udp/throughput needs datagrams of 8 bytes or more");
    }

    std::size_t size() const { return size_; }

    void fill(void* out, std::uint64_t seq) const {
        auto* p = static_cast<unsigned char*>(out);
        std::memcpy(p, &seq, sizeof seq);
        std::memcpy(p + sizeof seq, pattern_.round(seq), size_ - sizeof seq);
    }

    // Checks one received datagram of n bytes; throws bench_failure if it is not what the sender made.
    void check(const void* data, std::size_t n) {
        if (n != size_) throw bench_failure("datagram of " + std::to_string(n) + " bytes, expected " + std::to_string(size_));
        const auto* p = static_cast<const unsigned char*>(data);
        std::uint64_t seq;
        std::memcpy(&seq, p, sizeof seq);
        if (seq < next_) throw bench_failure("datagram " + std::to_string(seq) + " after " + std::to_string(next_ - 1));
        if (std::memcmp(p + sizeof seq, pattern_.round(seq), size_ - sizeof seq) != 0)
            throw bench_failure("datagram " + std::to_string(seq) + ": payload mismatch");
        lost_ += seq - next_;
        next_ = seq + 1;
        ++received_;
    }

    // Reports the share of datagrams lost on the way (an info line of the run).
    void report_loss(session& s) const {
        const std::uint64_t sent = received_ + lost_;
        s.info("udp_loss", std::to_string(lost_) + " of " + std::to_string(sent) + " datagrams dropped by the kernel");
    }

private:
    std::size_t size_;
    payload_pattern pattern_;
    std::uint64_t next_ = 0;
    std::uint64_t lost_ = 0;
    std::uint64_t received_ = 0;
};

}  // namespace tern_bench
