// tern/ws/detail/deflate.hpp
//
// permessage-deflate (RFC 7692) on zlib: raw deflate streams, each message ended by a sync flush whose 4-byte tail
// (00 00 ff ff) is left off on the wire and put back before inflating. The z_stream objects are allocated once per
// connection (with their windows), so a warm connection's messages cost no allocation in zlib either.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

struct z_stream_s;

namespace tern::ws::detail {

class deflater {
 public:
  // Raw deflate with a window of 2^window_bits (9..15: zlib cannot make 8) at level; no_context_takeover resets
  // the compressor after each message. Throws std::bad_alloc if zlib cannot allocate.
  deflater(int window_bits, bool no_context_takeover, int level);
  deflater(const deflater&) = delete;
  deflater& operator=(const deflater&) = delete;
  ~deflater();

  // Appends the compressed form of size bytes of data to out (one fragment of a message, flushed so that the peer
  // can inflate it all); fin ends the message: the flush's tail is removed.
  void compress(const void* data, std::size_t size, bool fin, std::string& out);

 private:
  std::unique_ptr<z_stream_s> z_;
  bool no_context_takeover_;
};

class inflater {
 public:
  // A raw inflater with a window of 2^15 (enough for any window the peer uses); no_context_takeover resets it
  // after each message. Throws std::bad_alloc.
  explicit inflater(bool no_context_takeover);
  inflater(const inflater&) = delete;
  inflater& operator=(const inflater&) = delete;
  ~inflater();

  // Inflates from [in, in + in_size) into [out, out + out_size); advances both. invalid_payload-like errors as
  // error::bad_compression.
  std::error_code run(const unsigned char*& in, std::size_t& in_size, unsigned char*& out, std::size_t& out_size);
  // After a message's last byte: inflates the flush tail. done once all of it went in and nothing more comes out;
  // call again with more room while !done.
  std::error_code finish(unsigned char*& out, std::size_t& out_size, bool& done);

 private:
  std::unique_ptr<z_stream_s> z_;
  bool no_context_takeover_;
  unsigned tail_fed_ = 0;
};

}  // namespace tern::ws::detail
