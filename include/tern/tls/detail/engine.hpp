// tern/tls/detail/engine.hpp
//
// engine: one TLS connection's OpenSSL side, without any I/O of its own. tls::stream<S> drives it and moves its
// ciphertext to and from the next layer.
//
// OpenSSL reads and writes records through a BIO of tern's (engine.cpp) bound to two buffers the engine allocates
// once: `input` holds ciphertext read from the next layer and not yet taken by OpenSSL, `output` the records
// OpenSSL wrote and the next layer has not taken yet. The next layer reads straight into the input buffer and
// writes straight from the output buffer, so a record is copied once each way in user space, between these buffers
// and OpenSSL's own record buffer. That copy is what the buffers cost against a socket BIO, whose system calls move
// ciphertext straight into and out of OpenSSL's buffer (2-3% of tls/throughput's samples, docs/benchmarks.md); it
// is what lets any stream type carry the records, and what keeps a cancelled read or write from leaving OpenSSL
// pointing at memory the kernel may still fill or read. Each engine step (handshake, read, write, shutdown) is one
// or a few non-blocking OpenSSL calls; when OpenSSL needs ciphertext that has not arrived, or room to write into,
// the step says so (want::input, want::output) and the stream does the I/O, then repeats the step.
//
// Invariants that make the full duplex work (a read task and a write task on one loop, interleaved only at their
// suspension points):
// - One socket read at a time fills the input buffer, at its back: the filler holds input_lock while its read is
//   pending, and only it compacts the buffer (before its read). OpenSSL takes bytes from the front meanwhile.
// - One socket write at a time sends from the output buffer's front: the sender holds output_lock and marks the
//   bytes in flight; OpenSSL appends behind them, and the buffer is compacted only when nothing is in flight.
// - A write step encrypts only while the output buffer has room for a whole record (record_room), so SSL_write
//   never stops inside a record and never has to be repeated with the same arguments: a write that is cancelled
//   leaves nothing half-done in OpenSSL, only whole records in the output buffer, which the next send carries.
// - It also leaves answer_room free at the back, for what a read makes OpenSSL answer (a KeyUpdate, an alert)
//   while a send is in flight: the reader appends it there, and the send in flight carries it, so a reader never
//   waits for the writer's send (only a peer that makes it answer more than answer_room at once can make it).
// - A step that stopped for input remembers input_generation(); a task that then finds the lock taken by another
//   filler, and the generation moved on, repeats its step instead of reading again, so the two tasks never wait for
//   bytes that one of them already has.
// - The first fatal error (a bad record, a failed handshake, a truncated stream) is kept and returned by every
//   later step: OpenSSL must not be called again after one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>

#include "tern/buffer.hpp"
#include "tern/sync/mutex.hpp"
#include "tern/tls/context.hpp"
#include "tern/tls/session.hpp"

struct ssl_st;

namespace tern::tls::detail {

// What a step needs before it can go on.
enum class want : unsigned char {
  nothing,  // the step is over: ec and bytes say how
  input,    // ciphertext from the next layer
  output,   // room in the output buffer: send what it holds
};

// The outcome of one step.
struct step {
  want next = want::nothing;
  std::size_t bytes = 0;  // plaintext moved by this step
  std::error_code ec;     // why it ended, when next is nothing: eof (the peer's close_notify), truncated, OpenSSL's
};

class engine {
 public:
  // A record's plaintext limit, and the room a write step needs to encrypt one record (with its header, MAC or tag,
  // padding, and a KeyUpdate OpenSSL may send before it).
  static constexpr std::size_t max_plaintext = 16384;
  static constexpr std::size_t record_room = max_plaintext + 2048;
  static constexpr std::size_t answer_room = 1024;

  // A connection of ctx's role. Throws std::runtime_error if OpenSSL cannot make one (out of memory).
  engine(const context& ctx, std::size_t input_size, std::size_t output_size);
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  ~engine();

  // stream::set_host_name and stream::set_session.
  std::error_code set_host_name(std::string_view host);
  std::error_code set_session(const session& s);

  // SSL_do_handshake.
  step handshake();
  // Decrypts into b: every record already complete, up to b's size.
  step read(mutable_buffer b);
  // Encrypts from b, a record at a time, while the output buffer has room for one.
  step write(const_buffer b);
  // Queues close_notify (once); over when it is in the output buffer.
  step shutdown();

  // The free space at the back of the input buffer, for one read of the next layer (compacted first).
  mutable_buffer input_space() noexcept;
  // The read into input_space() is over: n bytes arrived (0 after an error), or the next layer ended (eof).
  void input_done(std::size_t n, bool eof) noexcept;
  // Counts the reads of the next layer that brought something (bytes, or its end).
  std::uint64_t input_generation() const noexcept { return input_generation_; }

  // True while ciphertext waits to be sent.
  bool has_output() const noexcept { return out_end_ != out_begin_; }
  // The ciphertext waiting to be sent, marked in flight until output_done().
  const_buffer output() noexcept;
  // The send of output() is over: n bytes left; ec, if not a cancellation, breaks the sending side for good.
  void output_done(std::size_t n, const std::error_code& ec) noexcept;
  // The sending side's error, once a send failed (a record may have left in part: nothing can follow it).
  const std::error_code& output_error() const noexcept { return output_error_; }

  // What the stream's accessors of the same names report.
  bool handshake_done() const noexcept;
  bool session_reused() const noexcept;
  session current_session() const noexcept;
  std::string_view alpn_protocol() const noexcept;
  std::string_view server_name() const noexcept;
  std::string_view protocol_version() const noexcept;
  std::string_view cipher() const noexcept;
  bool ktls_send() const noexcept;
  bool ktls_receive() const noexcept;
  ssl_st* ssl() const noexcept { return ssl_; }

  // Server side, from the SNI callback: answer with other from now on.
  void select_context(const context& other);

  // Held by the one task reading from the next layer, and by the one task writing to it.
  sync::mutex input_lock;
  sync::mutex output_lock;

 private:
  friend struct bio_access;  // the BIO's callbacks (engine.cpp)

  // Turns an OpenSSL call's failure (ret) into a step; fatal errors are kept in fatal_.
  step after(int ret, std::size_t bytes);
  std::size_t output_room() const noexcept;

  context ctx_;                                // keeps the callbacks' state alive
  std::shared_ptr<context_state> selected_;    // a context chosen by SNI, kept alive the same way
  ssl_st* ssl_ = nullptr;
  std::unique_ptr<char[]> memory_;   // the input buffer, then the output buffer
  char* in_;
  char* out_;
  std::size_t in_size_;
  std::size_t out_size_;
  std::size_t in_begin_ = 0, in_end_ = 0;
  std::size_t out_begin_ = 0, out_end_ = 0;
  std::uint64_t input_generation_ = 0;
  bool in_eof_ = false;              // the next layer has ended: an empty input buffer is the end, not a retry
  bool sending_ = false;             // output() handed out bytes that are still in flight
  bool close_notify_queued_ = false;  // shutdown() has put close_notify in the output buffer
  std::error_code fatal_;            // the first fatal error; returned by every later step
  std::error_code output_error_;     // the first failed send (see output_error())
};

}  // namespace tern::tls::detail
