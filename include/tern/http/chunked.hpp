// tern/http/chunked.hpp
//
// chunked_decoder: the chunked transfer coding (RFC 9112 §7.1), decoded incrementally and without a copy.
//
// The decoder is fed whatever bytes have arrived of a chunked body; each call consumes chunk framing and returns
// the next run of body data as a view into the bytes given (a run ends where a chunk or the input ends), so the
// body can be handed on, hashed or written out without ever being moved. It keeps its state between calls, so
// framing split across reads (a chunk size cut in two, a CR at the end of one read and its LF at the start of the
// next) decodes the same as when it arrives whole.
//
// Strict: a chunk size is hexadecimal digits only and must fit 64 bits; whitespace is allowed only before a chunk
// extension's ';'; extensions may not hold control characters and are bounded in total; chunk data must be followed
// by exactly CRLF; trailer fields are parsed like header fields (and discarded) and bounded too; the total body is
// bounded by max_body (body_too_large, so that a server can answer 413).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "tern/http/error.hpp"

namespace tern::http {

class chunked_decoder {
 public:
  struct limits {
    std::uint64_t max_body = 8 * 1024 * 1024;     // body bytes over every chunk
    std::size_t max_extensions = 4 * 1024;        // chunk extension bytes over every chunk
    std::size_t max_trailers = 32 * 1024;         // the trailer section
  };

  struct step {
    std::size_t consumed = 0;  // bytes of the input used (framing and data)
    std::string_view data;     // body data among them (a view into the input), possibly empty
  };

  chunked_decoder() noexcept = default;
  explicit chunked_decoder(limits l) noexcept : limits_(l) {}

  // Decodes from the start of in. Call again with the input after step.consumed until done() (or, when consumed
  // is 0, after more input has arrived). Sets ec on malformed framing or a limit passed.
  step decode(std::string_view in, std::error_code& ec) noexcept;
  // The last chunk and the trailer section have been consumed: the body is complete.
  bool done() const noexcept { return state_ == state::done; }
  // Body bytes decoded so far.
  std::uint64_t body_size() const noexcept { return body_size_; }
  void reset() noexcept;

 private:
  enum class state : std::uint8_t {
    size,            // hex digits of a chunk size
    size_space,      // whitespace after the size, before ';'
    extension,       // after ';', up to CR
    size_lf,         // the LF of the size line
    data,            // remaining_ bytes of chunk data
    data_cr,         // the CR after chunk data
    data_lf,         // its LF
    trailer_start,   // the start of a trailer line (or of the final empty line)
    trailer,         // inside a trailer field line
    trailer_lf,      // the LF of a trailer line
    final_lf,        // the LF of the final empty line
    done,
  };

  limits limits_;
  state state_ = state::size;
  bool size_digits_ = false;         // the current size has at least one digit
  bool trailer_colon_ = false;       // the current trailer line has passed its name and colon
  bool trailer_name_ = false;        // and its name was not empty
  std::uint64_t remaining_ = 0;      // chunk size, then data bytes left
  std::uint64_t body_size_ = 0;
  std::size_t extension_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;
};

}  // namespace tern::http
