// The /ping service of http/ping_json (Ichor's benchmark): what a server does with a request once its HTTP stack
// has parsed it. Every stack's server calls this same code, so that they differ only in their HTTP and I/O.
//
// A POST to /ping with Content-Type application/json and the body {"sequence": N} is answered 200 with
// {"sequence":N}: the body is parsed as JSON into the one unsigned integer (simdjson's On-Demand API, chosen over
// RapidJSON for being about twice as fast on this body and on larger objects) and the answer is built from that
// integer, not copied from the request. Anything else gets a status and no body: 404 for another target, 405 for
// another method, 415 for another content type, 400 for a body that is not exactly such an object (a second key,
// a negative or fractional number, trailing bytes). The load generator checks every answer, so a stack that mangles
// a request or an answer fails the run.
//
// One service per server thread: simdjson's parser is not thread-safe, and its buffers are reused from one request
// to the next, so a warm service allocates nothing. An answer's bytes live in the caller's `answer`, which stays
// valid while the connection writes it (the service moves on to other connections meanwhile).
#pragma once

#include "../../harness/instructions.hpp"

#include <simdjson.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

namespace tern_bench::ping {

inline constexpr std::string_view path = "/ping";
inline constexpr std::string_view json_type = "application/json";
inline constexpr std::size_t max_body = 1024;  // a larger body is the HTTP stack's to refuse (413)

struct answer {
    int status = 0;
    char body[40];  // the longest, {"sequence":18446744073709551615}, is 33 bytes
    std::size_t size = 0;

    std::string_view text() const { return {body, size}; }
};

class service {
public:
    service() {
        // Room for the largest body up front, so that the first request does not allocate.
        if (parser_.allocate(max_body) != simdjson::SUCCESS) throw std::bad_alloc();
    }
    service(const service&) = delete;
    service& operator=(const service&) = delete;

    // The answer to one request; `content_type` is the request's field value ("" when it has none).
    void handle(std::string_view method, std::string_view target, std::string_view content_type,
                std::string_view body, answer& out) {
        out.size = 0;
        std::uint64_t sequence = 0;
        if (target != path)
            out.status = 404;
        else if (method != "POST")
            out.status = 405;
        else if (!is_json(content_type))
            out.status = 415;
        else if (!parse(body, sequence))
            out.status = 400;
        else
            out.status = 200;
        if (out.status == 200) {
            to_json(sequence, out);
            count(answered_);
            instructions::request_handled();
        } else {
            count(refused_);
        }
    }

    // Requests answered 200, and refused, so far; read from any thread (each counter has one writer, this
    // service's thread, so it is a plain load and store, no atomic read-modify-write on the request path).
    std::uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }
    std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

private:
    static void count(std::atomic<std::uint64_t>& c) {
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    static bool is_json(std::string_view v) {
        if (v.size() < json_type.size()) return false;
        for (std::size_t i = 0; i < json_type.size(); ++i) {
            char c = v[i] >= 'A' && v[i] <= 'Z' ? static_cast<char>(v[i] - 'A' + 'a') : v[i];
            if (c != json_type[i]) return false;  // media types are case-insensitive (RFC 9110 8.3.1)
        }
        std::string_view rest = v.substr(json_type.size());
        return rest.empty() || rest.front() == ';' || rest.front() == ' ';
    }

    // {"sequence": N} and nothing else, N an unsigned 64-bit integer.
    bool parse(std::string_view body, std::uint64_t& sequence) {
        if (body.size() > max_body) return false;
        // simdjson reads up to SIMDJSON_PADDING bytes past the end: the body is copied next to a padding of our
        // own rather than relying on what follows it in the connection's buffer.
        std::memcpy(padded_, body.data(), body.size());
        simdjson::ondemand::document doc;
        if (parser_.iterate(padded_, body.size(), sizeof padded_).get(doc) != simdjson::SUCCESS) return false;
        simdjson::ondemand::object object;
        if (doc.get_object().get(object) != simdjson::SUCCESS) return false;
        int keys = 0;
        for (auto field : object) {
            std::string_view key;
            if (field.unescaped_key().get(key) != simdjson::SUCCESS || key != "sequence" || ++keys > 1) return false;
            if (field.value().get_uint64().get(sequence) != simdjson::SUCCESS) return false;
        }
        // The object was walked to its end; anything after it is an error.
        return keys == 1 && doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
    }

    static void to_json(std::uint64_t sequence, answer& out) {
        constexpr std::string_view head = "{\"sequence\":";
        static_assert(sizeof(answer::body) >= head.size() + 20 + 1, "room for 20 digits and the brace");
        std::memcpy(out.body, head.data(), head.size());
        char* end = out.body + sizeof out.body;
        auto [p, ec] = std::to_chars(out.body + head.size(), end - 1, sequence);
        *p++ = '}';
        out.size = static_cast<std::size_t>(p - out.body);
    }

    simdjson::ondemand::parser parser_;
    alignas(64) char padded_[max_body + simdjson::SIMDJSON_PADDING];
    std::atomic<std::uint64_t> answered_{0};
    std::atomic<std::uint64_t> refused_{0};
};

}  // namespace tern_bench::ping
