// libFuzzer target: http::chunked_decoder given arbitrary bytes as a chunked body, whole and in pieces of varying
// sizes, checking:
// - each step consumes no more than it was given, and its data is a view into what it consumed (the last bytes of
//   it); a step that consumes nothing has met an error, the end of the body, or the end of the input;
// - body_size() is the number of data bytes delivered so far, never over max_body;
// - the body, the error, whether it is done and the bytes consumed are the same whole, a byte at a time, in pieces
//   of any size, after reset(), and with the default limits when smaller ones accepted it;
// - once done(), nothing more is consumed, whatever follows;
// - and, where the limits on extensions and trailers cannot be reached, the same verdict as a second decoder
//   written here from the grammar in chunked.hpp that reads the whole input at once.
// One input in four is decoded with small limits (chosen from its bytes), so that every limit is reached.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "fuzz_support.hpp"
#include "head_checks.hpp"
#include "tern/http/chunked.hpp"

namespace {

namespace http = tern::http;
using namespace tern::fuzz;

struct decoded {
  std::string body;
  std::error_code ec;
  bool done = false;
  std::size_t consumed = 0;  // input bytes used, the failing step's included
};

bool operator==(const decoded& a, const decoded& b) {
  return a.body == b.body && a.ec == b.ec && a.done == b.done && a.consumed == b.consumed;
}

void print(const char* label, const decoded& d) {
  std::fprintf(stderr, "%s: done=%d error=%s consumed=%zu body=%zu bytes\n", label, d.done,
               d.ec ? d.ec.message().c_str() : "none", d.consumed, d.body.size());
}

void expect_same(const decoded& expected, const decoded& got, const char* how) {
  if (expected == got) return;
  print("whole input", expected);
  print(how, got);
  invariant_failed(how, __FILE__, __LINE__);
}

// One decode() call on in, with the checks that hold for any single step; adds its data to out.
http::chunked_decoder::step decode_step(http::chunked_decoder& d, std::string_view in,
                                         const http::chunked_decoder::limits& limits, decoded& out) {
  std::error_code ec;
  const std::uint64_t before = d.body_size();
  const bool was_done = d.done();
  const auto s = d.decode(in, ec);
  TERN_FUZZ_CHECK(s.consumed <= in.size());
  TERN_FUZZ_CHECK(s.data.empty() || (inside(s.data, in.substr(0, s.consumed)) &&
                                     offset_in(s.data, in) + s.data.size() == s.consumed));
  TERN_FUZZ_CHECK(d.body_size() == before + s.data.size() && d.body_size() <= limits.max_body);
  if (was_done) TERN_FUZZ_CHECK(s.consumed == 0 && s.data.empty() && !ec && d.done());
  if (s.consumed == 0 && !in.empty()) TERN_FUZZ_CHECK(ec || d.done());  // never stuck with input to read
  if (ec) TERN_FUZZ_CHECK(s.data.empty() && !d.done());
  check_error(ec);
  out.body.append(s.data);
  out.consumed += s.consumed;
  out.ec = ec;
  out.done = d.done();
  return s;
}

// The input given all at once: decode() on what is left, until an error, the end of the body or of the input.
decoded decode_whole(http::chunked_decoder& d, std::string_view in, const http::chunked_decoder::limits& limits) {
  decoded out;
  while (!out.ec && !out.done && out.consumed < in.size()) decode_step(d, in.substr(out.consumed), limits, out);
  TERN_FUZZ_CHECK(d.body_size() == out.body.size());
  if (!out.ec && !out.done) TERN_FUZZ_CHECK(out.consumed == in.size());
  return out;
}

// The input arriving in pieces (sizes from piece()) into a receive buffer; decode() is called on what has arrived
// and not been consumed, in a buffer of exactly that size (a read past it is caught), until it needs more.
template <class Piece>
decoded decode_pieces(http::chunked_decoder& d, std::string_view in, const http::chunked_decoder::limits& limits,
                      Piece piece) {
  decoded out;
  std::string pending;
  std::size_t arrived = 0;
  while (!out.ec && !out.done) {
    if (pending.empty()) {
      if (arrived == in.size()) break;
      const std::size_t n = std::min<std::size_t>(piece(), in.size() - arrived);
      pending.append(in.substr(arrived, n));
      arrived += n;
    }
    const exact_copy buffer(pending);
    const auto s = decode_step(d, buffer.view(), limits, out);
    pending.erase(0, s.consumed);
  }
  TERN_FUZZ_CHECK(d.body_size() == out.body.size());
  return out;
}

// After the end of the body, the decoder consumes nothing more: neither the bytes after the body nor any others.
void check_stays_done(http::chunked_decoder& d, std::string_view after, const http::chunked_decoder::limits& limits) {
  if (!d.done()) return;
  decoded ignored;
  const exact_copy rest(after);
  decode_step(d, rest.view(), limits, ignored);
  decode_step(d, "0\r\n\r\n", limits, ignored);
  decode_step(d, {}, limits, ignored);
  TERN_FUZZ_CHECK(ignored.consumed == 0 && ignored.body.empty() && d.done());
}

// ---- a second decoder, for comparison ----

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The grammar of chunked.hpp read straight through the whole input, by position: chunk = 1*HEXDIG (fitting 64
// bits) [*WSP ";" ext-chars] CRLF data CRLF; the last chunk "0" is followed by trailer field lines (a token, a
// colon, value characters, CRLF) and an empty line. Models max_body only: the caller uses it where the limits on
// extensions and trailers cannot be reached.
decoded reference_decode(std::string_view in, std::uint64_t max_body) {
  decoded r;
  std::size_t i = 0;
  const std::size_t n = in.size();
  const auto fail = [&](http::error e, std::size_t at) {
    r.ec = make_error_code(e);
    r.consumed = at;
    return r;
  };
  const auto incomplete = [&] {
    r.consumed = n;
    return r;
  };
  for (;;) {
    std::uint64_t size = 0;
    const std::size_t digits_at = i;
    for (; i < n && hex_digit(in[i]) >= 0; ++i) {
      if (size >> 60 != 0) return fail(http::error::bad_chunk_size, i);
      size = size * 16 + static_cast<unsigned>(hex_digit(in[i]));
    }
    if (i == n) return incomplete();
    if (i == digits_at) return fail(http::error::bad_chunk_size, i);
    if (blank(in[i])) {  // whitespace only before an extension
      while (i < n && blank(in[i])) ++i;
      if (i == n) return incomplete();
      if (in[i] != ';') return fail(http::error::bad_chunk_size, i);
    }
    if (in[i] == ';') {
      for (++i; i < n && in[i] != '\r'; ++i) {
        if (!value_char(in[i])) return fail(http::error::bad_chunk_extension, i);
      }
      if (i == n) return incomplete();
    }
    if (in[i] != '\r') return fail(http::error::bad_chunk_size, i);
    if (++i == n) return incomplete();
    if (in[i] != '\n') return fail(http::error::bad_line_ending, i);
    ++i;
    if (size == 0) break;
    if (size > max_body - r.body.size()) return fail(http::error::body_too_large, i);
    if (size > n - i) {
      r.body.append(in.substr(i));
      return incomplete();
    }
    r.body.append(in.substr(i, static_cast<std::size_t>(size)));
    i += static_cast<std::size_t>(size);
    if (i == n) return incomplete();
    if (in[i] != '\r') return fail(http::error::bad_chunk_end, i);
    if (++i == n) return incomplete();
    if (in[i] != '\n') return fail(http::error::bad_chunk_end, i);
    ++i;
  }
  for (;;) {  // the trailer section
    if (i == n) return incomplete();
    if (in[i] == '\r') {
      if (++i == n) return incomplete();
      if (in[i] != '\n') return fail(http::error::bad_line_ending, i);
      r.done = true;
      r.consumed = i + 1;
      return r;
    }
    const std::size_t name_at = i;
    while (i < n && token_char(in[i])) ++i;
    if (i == n) return incomplete();
    if (i == name_at || in[i] != ':') return fail(http::error::bad_trailer, i);
    for (++i; i < n && in[i] != '\r'; ++i) {
      if (!value_char(in[i])) return fail(http::error::bad_trailer, i);
    }
    if (i == n || ++i == n) return incomplete();
    if (in[i] != '\n') return fail(http::error::bad_line_ending, i);
    ++i;
  }
}

http::chunked_decoder::limits small_limits(choices& pick) {
  http::chunked_decoder::limits l;
  if (pick.one_in(2)) l.max_body = pick.below(300);
  if (pick.one_in(2)) l.max_extensions = pick.below(40);
  if (pick.one_in(2)) l.max_trailers = pick.below(80);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(bytes), size);
  choices pick(in);
  const http::chunked_decoder::limits defaults;
  const http::chunked_decoder::limits limits = pick.one_in(4) ? small_limits(pick) : defaults;

  http::chunked_decoder d(limits);
  const decoded whole = decode_whole(d, in, limits);
  check_stays_done(d, in.substr(whole.consumed), limits);

  // reset() forgets the body and keeps the limits.
  d.reset();
  expect_same(whole, decode_whole(d, in, limits), "the same bytes after reset()");

  {
    http::chunked_decoder one(limits);
    expect_same(whole, decode_pieces(one, in, limits, [] { return std::size_t{1}; }), "fed a byte at a time");
  }
  {
    // Pieces up to a maximum chosen per input, from a few bytes (framing cut everywhere) to large reads.
    const std::uint64_t max_piece = std::uint64_t{1} << pick.below(12);
    http::chunked_decoder pieces(limits);
    const decoded got = decode_pieces(pieces, in, limits, [&] { return pick.between(1, max_piece); });
    expect_same(whole, got, "fed in pieces");
    check_stays_done(pieces, {}, limits);
  }

  // Limits only refuse: what smaller limits accept, the default ones accept the same.
  if (!whole.ec) {
    http::chunked_decoder roomy;
    expect_same(whole, decode_whole(roomy, in, defaults), "with the default limits");
  }

  // The decoder's verdict is the grammar's, where only max_body of the limits can be reached.
  if (in.size() <= limits.max_extensions && in.size() <= limits.max_trailers) {
    const decoded reference = reference_decode(in, limits.max_body);
    if (!(reference == whole)) {
      print("reference decoder", reference);
      print("chunked_decoder", whole);
      invariant_failed("the decoder and the grammar disagree", __FILE__, __LINE__);
    }
  }
  return 0;
}
