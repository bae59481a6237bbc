// The chunked transfer coding, decoded incrementally (see tern/http/chunked.hpp).
//
// A byte-at-a-time state machine for the framing (a few bytes per chunk) and one view per run of data: the data
// itself is never looked at, so decoding costs the same whatever the chunk sizes.
#include "tern/http/chunked.hpp"

#include "chars.hpp"

namespace tern::http {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void chunked_decoder::reset() noexcept {
  const limits l = limits_;
  *this = chunked_decoder(l);
}

chunked_decoder::step chunked_decoder::decode(std::string_view in, std::error_code& ec) noexcept {
  ec.clear();
  const std::size_t n = in.size();
  std::size_t i = 0;
  const auto failed = [&](error e) {
    ec = make_error_code(e);
    return step{i, {}};
  };
  while (i < n) {
    const char c = in[i];
    switch (state_) {
      case state::size: {
        const int d = hex_value(c);
        if (d >= 0) {
          if ((remaining_ >> 60) != 0) return failed(error::bad_chunk_size);  // a 17th significant digit
          remaining_ = remaining_ * 16 + static_cast<unsigned>(d);
          size_digits_ = true;
        } else if (!size_digits_) {
          return failed(error::bad_chunk_size);
        } else if (c == '\r') {
          state_ = state::size_lf;
        } else if (c == ';') {
          state_ = state::extension;
        } else if (c == ' ' || c == '\t') {
          state_ = state::size_space;
        } else {
          return failed(error::bad_chunk_size);
        }
        ++i;
        break;
      }
      case state::size_space:  // BWS before a chunk extension, and only there
        if (c == ';') {
          state_ = state::extension;
        } else if (c != ' ' && c != '\t') {
          return failed(error::bad_chunk_size);
        }
        if (++extension_bytes_ > limits_.max_extensions) return failed(error::bad_chunk_extension);
        ++i;
        break;
      case state::extension:
        if (c == '\r') {
          state_ = state::size_lf;
        } else if (!detail::is(c, detail::value_char) || ++extension_bytes_ > limits_.max_extensions) {
          return failed(error::bad_chunk_extension);
        }
        ++i;
        break;
      case state::size_lf:
        if (c != '\n') return failed(error::bad_line_ending);
        ++i;
        size_digits_ = false;
        if (remaining_ == 0) {
          state_ = state::trailer_start;
        } else {
          if (remaining_ > limits_.max_body - body_size_) return failed(error::body_too_large);
          state_ = state::data;
        }
        break;
      case state::data: {
        const std::size_t take = remaining_ < n - i ? static_cast<std::size_t>(remaining_) : n - i;
        remaining_ -= take;
        body_size_ += take;
        if (remaining_ == 0) state_ = state::data_cr;
        return {i + take, in.substr(i, take)};
      }
      case state::data_cr:
        if (c != '\r') return failed(error::bad_chunk_end);
        state_ = state::data_lf;
        ++i;
        break;
      case state::data_lf:
        if (c != '\n') return failed(error::bad_chunk_end);
        state_ = state::size;
        ++i;
        break;
      case state::trailer_start:
        if (c == '\r') {
          state_ = state::final_lf;
          ++i;
          break;
        }
        trailer_colon_ = trailer_name_ = false;
        state_ = state::trailer;
        [[fallthrough]];
      case state::trailer:
        if (++trailer_bytes_ > limits_.max_trailers) return failed(error::bad_trailer);
        if (!trailer_colon_) {
          // name: a token, then the colon right after it (no obs-fold, no whitespace before the colon)
          if (detail::is(c, detail::token_char)) {
            trailer_name_ = true;
          } else if (c == ':' && trailer_name_) {
            trailer_colon_ = true;
          } else {
            return failed(error::bad_trailer);
          }
        } else if (c == '\r') {
          state_ = state::trailer_lf;
        } else if (!detail::is(c, detail::value_char)) {
          return failed(error::bad_trailer);
        }
        ++i;
        break;
      case state::trailer_lf:
        if (c != '\n') return failed(error::bad_line_ending);
        state_ = state::trailer_start;
        ++i;
        break;
      case state::final_lf:
        if (c != '\n') return failed(error::bad_line_ending);
        state_ = state::done;
        return {i + 1, {}};
      case state::done: return {i, {}};
    }
  }
  return {i, {}};
}

}  // namespace tern::http
