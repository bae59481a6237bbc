// The messages of sockets/messages: mg::aio bench_io's length-prefixed frames, encoded, decoded and verified by
// this one code on every stack, so that every implementation does the same work per message and only its I/O
// differs.
//
// A frame on the wire (host byte order, as bench_io):
//   u64 body size | u64 timestamp | u32 int_count | int_count x u32 | u64 payload size | payload
// The timestamp is the client's steady clock in ns when it sent the request (bench_io: ms); all the ints carry one
// random value; the payload repeats 0xdeadbeef. Decoding checks every field: the body size against its parts, the
// int count and payload size against the run's, every int against the first, the payload byte for byte. A frame
// that fails any check fails the run.
//
// frame_connection is one side of a connection: a receive buffer that read_some fills (8 KiB at a time, bench_io's
// default recv_size), the decoder that walks the complete frames in it, and the send buffer that the replies of
// one receive are encoded into, to go out in one write.
#pragma once

#include "../../harness/traffic.hpp"
#include "../../harness/worker.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tern_bench::frames {

inline constexpr std::size_t recv_size = 8192;

struct frame_shape {
    std::size_t payload = 128;
    std::uint32_t ints = 0;

    std::size_t body_size() const { return 8 + 4 + 4 * std::size_t{ints} + 8 + payload; }
    std::size_t wire_size() const { return 8 + body_size(); }
};

class codec {
public:
    explicit codec(frame_shape shape) : shape_(shape), payload_(shape.payload) {
        static constexpr unsigned char pattern[4] = {0xde, 0xad, 0xbe, 0xef};
        for (std::size_t i = 0; i < payload_.size(); ++i) payload_[i] = pattern[i % 4];
    }

    const frame_shape& shape() const { return shape_; }

    // Appends one frame to out.
    void encode(std::vector<unsigned char>& out, std::uint64_t timestamp_ns, std::uint32_t value) const {
        std::size_t at = out.size();
        out.resize(at + shape_.wire_size());
        unsigned char* p = out.data() + at;
        put64(p, shape_.body_size());
        put64(p, timestamp_ns);
        put32(p, shape_.ints);
        for (std::uint32_t i = 0; i < shape_.ints; ++i) put32(p, value);
        put64(p, shape_.payload);
        std::memcpy(p, payload_.data(), payload_.size());
    }

    // The size of the frame starting at p, once its 8-byte header is there; checked against the run's shape.
    std::size_t frame_size(const unsigned char* p) const {
        std::uint64_t body = get64(p);
        if (body != shape_.body_size())
            throw bench_failure("frame: body size " + std::to_string(body) + ", expected " +
                                std::to_string(shape_.body_size()));
        return 8 + static_cast<std::size_t>(body);
    }

    struct message {
        std::uint64_t timestamp_ns;
        std::uint32_t value;
    };

    // Decodes and verifies the complete frame at p.
    message decode(const unsigned char* p, const char* side) const {
        p += 8;
        message m{get64(p), 0};
        std::uint32_t count = get32(p);
        if (count != shape_.ints) fail(side, "int count");
        if (count > 0) m.value = get32(p);
        for (std::uint32_t i = 1; i < count; ++i)
            if (get32(p) != m.value) fail(side, "int value");
        if (get64(p) != shape_.payload) fail(side, "payload size");
        if (std::memcmp(p, payload_.data(), payload_.size()) != 0) fail(side, "payload bytes");
        return m;
    }

private:
    [[noreturn]] static void fail(const char* side, const char* what) {
        throw bench_failure(std::string(side) + ": corrupted frame (" + what + ")");
    }
    static void put64(unsigned char*& p, std::uint64_t v) {
        std::memcpy(p, &v, 8);
        p += 8;
    }
    static void put32(unsigned char*& p, std::uint32_t v) {
        std::memcpy(p, &v, 4);
        p += 4;
    }
    static std::uint64_t get64(const unsigned char*& p) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        p += 8;
        return v;
    }
    static std::uint32_t get32(const unsigned char*& p) {
        std::uint32_t v;
        std::memcpy(&v, p, 4);
        p += 4;
        return v;
    }

    frame_shape shape_;
    std::vector<unsigned char> payload_;
};

class frame_connection {
public:
    explicit frame_connection(const codec& c) : codec_(&c), in_(recv_size + c.shape().wire_size()) {
        out_.reserve(c.shape().wire_size() * 8);
    }

    // Where the next read_some goes: recv_size bytes (bench_io's receive size), after what is buffered.
    unsigned char* space() {
        if (in_.size() - len_ < recv_size) in_.resize(len_ + recv_size);
        return in_.data() + len_;
    }
    static constexpr std::size_t space_size() { return recv_size; }

    // n bytes arrived in space(): calls on_message(message) for each complete frame, in order, and keeps the
    // partial frame that may follow. Returns the number of complete frames.
    template <class F>
    std::size_t received(std::size_t n, const char* side, F&& on_message) {
        len_ += n;
        std::size_t pos = 0, count = 0;
        while (len_ - pos >= 8) {
            std::size_t size = codec_->frame_size(in_.data() + pos);
            if (len_ - pos < size) break;
            on_message(codec_->decode(in_.data() + pos, side));
            pos += size;
            ++count;
        }
        if (pos > 0) {
            std::memmove(in_.data(), in_.data() + pos, len_ - pos);
            len_ -= pos;
        }
        return count;
    }

    // Nothing received but not yet decoded.
    bool empty() const { return len_ == 0; }

    std::vector<unsigned char>& out() { return out_; }

private:
    const codec* codec_;
    std::vector<unsigned char> in_;
    std::size_t len_ = 0;
    std::vector<unsigned char> out_;
};

// The requests a client connection has in flight, oldest first: a TCP connection answers in order, so each reply
// must carry the timestamp and the value of the oldest request, which checks the fields the codec alone cannot.
class in_flight_log {
public:
    explicit in_flight_log(std::size_t capacity) : slots_(capacity) {}

    void sent(std::uint64_t timestamp_ns, std::uint32_t value) {
        if (count_ == slots_.size()) throw bench_failure("client: more requests in flight than `parallel`");
        slots_[(head_ + count_++) % slots_.size()] = {timestamp_ns, value};
    }

    // Checks a reply against the oldest request and retires it.
    void replied(const codec::message& m) {
        if (count_ == 0) throw bench_failure("client: a reply to no request");
        const codec::message& want = slots_[head_];
        if (m.timestamp_ns != want.timestamp_ns || m.value != want.value)
            throw bench_failure("client: a reply does not match its request");
        head_ = (head_ + 1) % slots_.size();
        --count_;
    }

    std::size_t size() const { return count_; }

private:
    std::vector<codec::message> slots_;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
};

// The random value of the next request (xorshift32; bench_io draws one per message too).
class value_source {
public:
    explicit value_source(std::uint32_t seed) : x_(seed | 1u) {}
    std::uint32_t next() {
        x_ ^= x_ << 13;
        x_ ^= x_ >> 17;
        x_ ^= x_ << 5;
        return x_;
    }

private:
    std::uint32_t x_;
};

inline std::uint64_t now_ns();
inline bench_clock::time_point from_ns(std::uint64_t ns);

// The client side of one connection: sends `parallel` requests, then for every receive checks each reply against
// its request, records its round trip, and while the meter runs encodes one new request per reply, all of them to
// go out in one write. finished() once the meter is over and every reply is in.
class client_connection {
public:
    client_connection(const codec& c, std::size_t parallel, std::uint32_t seed)
        : codec_(&c), conn_(c), log_(parallel), values_(seed), parallel_(parallel) {}

    frame_connection& conn() { return conn_; }
    std::vector<unsigned char>& out() { return conn_.out(); }

    void start() {
        for (std::size_t i = 0; i < parallel_; ++i) send(now_ns());
    }

    void received(std::size_t n, request_meter& meter) {
        std::uint64_t t1_ns = now_ns();
        auto t1 = from_ns(t1_ns);
        conn_.received(n, "client", [&](const codec::message& m) {
            log_.replied(m);
            if (sending_ && !meter.record(from_ns(m.timestamp_ns), t1)) sending_ = false;
            if (sending_) send(t1_ns);
        });
    }

    bool finished() const { return log_.size() == 0; }

private:
    void send(std::uint64_t timestamp_ns) {
        std::uint32_t v = codec_->shape().ints > 0 ? values_.next() : 0;  // no ints: the value is not on the wire
        codec_->encode(conn_.out(), timestamp_ns, v);
        log_.sent(timestamp_ns, v);
    }

    const codec* codec_;
    frame_connection conn_;
    in_flight_log log_;
    value_source values_;
    std::size_t parallel_;
    bool sending_ = true;
};

// The server side of one connection: every request of a receive is answered with the same message.
class server_connection {
public:
    explicit server_connection(const codec& c) : codec_(&c), conn_(c) {}

    frame_connection& conn() { return conn_; }
    std::vector<unsigned char>& out() { return conn_.out(); }

    void received(std::size_t n) {
        conn_.received(n, "server",
                       [&](const codec::message& m) { codec_->encode(conn_.out(), m.timestamp_ns, m.value); });
    }

    // At end of stream: nothing may be left half received.
    void check_end() const {
        if (!conn_.empty()) throw bench_failure("server: end of stream inside a frame");
    }

private:
    const codec* codec_;
    frame_connection conn_;
};

inline std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(bench_clock::now().time_since_epoch()).count());
}
inline bench_clock::time_point from_ns(std::uint64_t ns) {
    return bench_clock::time_point(std::chrono::duration_cast<bench_clock::duration>(std::chrono::nanoseconds(ns)));
}

// The run's parameters, read the same way by every implementation.
struct messages_params {
    frame_shape shape;
    std::size_t conns;
    std::size_t parallel;
    int threads;  // 1: client and server share one loop on CPU 0; 2: client loop on CPU 0, server loop on CPU 1
};

inline messages_params read_messages_params(const session& s) {
    messages_params p;
    p.shape.payload = static_cast<std::size_t>(s.param_int("payload"));
    p.shape.ints = static_cast<std::uint32_t>(s.param_int("ints"));
    p.conns = static_cast<std::size_t>(s.param_int("conns"));
    p.parallel = static_cast<std::size_t>(s.param_int("parallel"));
    p.threads = static_cast<int>(s.param_int("threads"));
    if (p.threads != 1 && p.threads != 2) throw bench_failure("threads must be 1 or 2");
    if (p.conns == 0 || p.parallel == 0) throw bench_failure("conns and parallel must be positive");
    return p;
}

}  // namespace tern_bench::frames
