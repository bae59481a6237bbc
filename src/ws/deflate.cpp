// permessage-deflate on zlib (see tern/ws/detail/deflate.hpp).
#include "tern/ws/detail/deflate.hpp"

#include <zlib.h>

#include <new>

#include "tern/ws/error.hpp"

namespace tern::ws::detail {

namespace {
constexpr unsigned char flush_tail[4] = {0x00, 0x00, 0xff, 0xff};
}

deflater::deflater(int window_bits, bool no_context_takeover, int level)
    : z_(std::make_unique<z_stream_s>()), no_context_takeover_(no_context_takeover) {
  if (window_bits < 9) window_bits = 9;
  if (deflateInit2(z_.get(), level, Z_DEFLATED, -window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    z_.reset();
    throw std::bad_alloc();
  }
}

deflater::~deflater() {
  if (z_) deflateEnd(z_.get());
}

void deflater::compress(const void* data, std::size_t size, bool fin, std::string& out) {
  z_stream_s& z = *z_;
  const std::size_t start = out.size();
  z.next_in = static_cast<Bytef*>(const_cast<void*>(data));
  z.avail_in = static_cast<uInt>(size);
  for (;;) {
    const std::size_t used = out.size();
    const std::size_t room = deflateBound(&z, z.avail_in) + 16;
    out.resize(used + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    z.avail_out = static_cast<uInt>(room);
    deflate(&z, Z_SYNC_FLUSH);
    out.resize(used + room - z.avail_out);
    if (z.avail_in == 0 && z.avail_out != 0) break;  // all in, and the flush had room to finish
  }
  if (fin) {
    if (out.size() - start >= 4 &&
        out.compare(out.size() - 4, 4, reinterpret_cast<const char*>(flush_tail), 4) == 0) {
      out.resize(out.size() - 4);
    } else if (out.size() == start) {
      // No new input since the last flush: zlib writes nothing. The receiver appends the tail (00 00 ff ff) and
      // needs the empty stored block's first byte before it (RFC 7692 §7.2.3.6).
      out.push_back('\0');
    }
    if (no_context_takeover_) deflateReset(&z);
  }
}

inflater::inflater(bool no_context_takeover)
    : z_(std::make_unique<z_stream_s>()), no_context_takeover_(no_context_takeover) {
  if (inflateInit2(z_.get(), -15) != Z_OK) {
    z_.reset();
    throw std::bad_alloc();
  }
}

inflater::~inflater() {
  if (z_) inflateEnd(z_.get());
}

std::error_code inflater::run(const unsigned char*& in, std::size_t& in_size, unsigned char*& out,
                              std::size_t& out_size) {
  z_stream_s& z = *z_;
  z.next_in = const_cast<Bytef*>(in);
  z.avail_in = static_cast<uInt>(in_size);
  z.next_out = out;
  z.avail_out = static_cast<uInt>(out_size);
  const int rc = inflate(&z, Z_SYNC_FLUSH);
  in_size -= static_cast<std::size_t>(z.next_in - in);
  in = z.next_in;
  out_size -= static_cast<std::size_t>(z.next_out - out);
  out = z.next_out;
  // Z_BUF_ERROR is no progress possible (no input or no room), not a failure; Z_STREAM_END means a final block,
  // which a message may end with (the peer used Z_FINISH): the stream starts over for the next one.
  if (rc == Z_OK || rc == Z_BUF_ERROR) return {};
  if (rc == Z_STREAM_END) {
    inflateReset(&z);
    return {};
  }
  return error::bad_compression;
}

std::error_code inflater::finish(unsigned char*& out, std::size_t& out_size, bool& done) {
  done = false;
  const unsigned char* tail = flush_tail + tail_fed_;
  std::size_t tail_size = 4 - tail_fed_;
  if (std::error_code ec = run(tail, tail_size, out, out_size)) return ec;
  tail_fed_ = 4 - static_cast<unsigned>(tail_size);
  if (tail_fed_ == 4 && out_size != 0) {
    done = true;
    tail_fed_ = 0;
    if (no_context_takeover_) inflateReset(z_.get());
  }
  return {};
}

}  // namespace tern::ws::detail
