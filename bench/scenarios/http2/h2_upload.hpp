// http2/ping_json's upload point (instruction mode, param `body`): a POST of `body` bytes to /upload, answered 200
// with the body's size, head and tail as text. It measures a server's request-body path (tern: the stream's
// body_buffer, whose pages are mapped above its small buffer) rather than a handler's work: the answer reads 2 x 16
// bytes of the body, whatever its size. The body is a pattern with the request's sequence stamped at both ends, so
// that an answer from a stale, truncated or shifted body does not match. Shared by the servers and by
// tern-bench-client, which checks every answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern_bench::h2 {

inline constexpr const char* upload_path = "/upload";
inline constexpr std::size_t upload_stamp = 16;          // the bytes of each end the answer echoes
inline constexpr std::size_t max_upload = 1024 * 1024;   // a larger body is refused

inline std::string make_upload(std::size_t size) {
    std::string body(size, '\0');
    for (std::size_t i = 0; i < size; ++i) body[i] = static_cast<char>('A' + (i % 253) % 26);
    return body;
}

// Writes the sequence, 16 digits, at both ends of the body.
inline void stamp_upload(std::string& body, std::uint64_t sequence) {
    char digits[upload_stamp];
    for (std::size_t i = upload_stamp; i-- > 0; sequence /= 10) digits[i] = static_cast<char>('0' + sequence % 10);
    body.replace(0, upload_stamp, digits, upload_stamp);
    body.replace(body.size() - upload_stamp, upload_stamp, digits, upload_stamp);
}

// "<size> <head> <tail>" into `out` (at least upload_answer_size bytes); returns its length.
inline constexpr std::size_t upload_answer_size = 24 + 2 * upload_stamp;
inline std::size_t upload_answer(std::string_view body, char* out) {
    std::size_t n = 0;
    std::uint64_t size = body.size();
    char digits[20];
    std::size_t d = 0;
    do digits[d++] = static_cast<char>('0' + size % 10); while ((size /= 10) != 0);
    while (d > 0) out[n++] = digits[--d];
    const std::size_t k = body.size() < upload_stamp ? body.size() : upload_stamp;
    out[n++] = ' ';
    for (std::size_t i = 0; i < k; ++i) out[n++] = body[i];
    out[n++] = ' ';
    for (std::size_t i = body.size() - k; i < body.size(); ++i) out[n++] = body[i];
    return n;
}

inline std::string upload_answer(std::string_view body) {
    char out[upload_answer_size];
    return std::string(out, upload_answer(body, out));
}

}  // namespace tern_bench::h2
