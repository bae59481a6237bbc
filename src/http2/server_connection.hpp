// One HTTP/2 connection of an http::server, and its streams (internal; see server_connection.cpp).
#pragma once

#include <array>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "nghttp2_api.hpp"
#include "tern/http/parser.hpp"
#include "tern/http/protocol.hpp"
#include "tern/http/request.hpp"
#include "tern/http/response.hpp"
#include "tern/http/server.hpp"
#include "tern/http/stream.hpp"
#include "tern/http2/server.hpp"
#include "tern/io_context.hpp"
#include "tern/sync/event.hpp"
#include "tern/timer.hpp"

namespace tern::http2::detail {

class server_connection;
struct stream_pool;

// Tasks still running, and the one coroutine that waits until there are none. Not cancellable on purpose: the
// connection's end waits here for the tasks it has just cancelled, whatever stop it was itself given.
class task_count {
 public:
  void add() noexcept { ++running_; }
  // A task ended: the waiter, if this was the last one, resumes from the loop's queue (not inside the task).
  void done(io_context& ctx) noexcept;
  std::size_t running() const noexcept { return running_; }

  struct awaiter {
    task_count* count;
    bool await_ready() const noexcept { return count->running_ == 0; }
    void await_suspend(std::coroutine_handle<> h) noexcept { count->waiter_ = h; }
    void await_resume() const noexcept {}
  };
  awaiter wait() noexcept { return {this}; }

 private:
  std::size_t running_ = 0;
  std::coroutine_handle<> waiter_;
};

// A request body's bytes as they arrive, in one piece. The first small_size bytes go to a buffer the stream keeps
// for its next request; more go to pages of their own, grown with mremap (no copy) and given back with munmap when
// the stream is done, so that the memory a body holds is what it has received, to the page. A string appended to
// instead doubled its capacity and copied itself as it grew, and the heap kept what it freed: 99 uploads of 1 MiB
// on one connection held 43 MiB of buffers for 25 MiB of bytes, and a peak RSS of 49 to 63 MiB above idle where
// the bounds on those bytes allow 33.
class body_buffer {
 public:
  static constexpr std::size_t small_size = 16 * 1024;

  body_buffer() = default;
  ~body_buffer() { release(); }
  body_buffer(const body_buffer&) = delete;
  body_buffer& operator=(const body_buffer&) = delete;

  void append(const char* data, std::size_t n);
  std::size_t size() const noexcept { return end_ - begin_; }
  // Copies up to n bytes from the front into out, and drops them; the number copied.
  std::size_t take(char* out, std::size_t n) noexcept;
  std::string_view view() const noexcept { return std::string_view(data_ + begin_, size()); }
  // Empty, keeping the small buffer and pages of up to 64 KiB for the next body; release() keeps nothing.
  void clear() noexcept;
  void release() noexcept;

 private:
  void make_room(std::size_t n);
  void unmap() noexcept;

  std::unique_ptr<char[]> small_;
  char* mapped_ = nullptr;
  std::size_t mapped_size_ = 0;
  char* data_ = nullptr;  // small_ or mapped_
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// The bytes of a request's header fields, kept until clear(). A short name or value (the usual ones: a path, an
// authority, a content type) is copied into a block the stream keeps, which costs less than taking and releasing a
// reference to nghttp2's buffer; a longer one is held by reference, so that a header block of many references to
// one large dynamic-table entry (the HTTP/2 Bomb, CVE-2026-49975) costs the server a reference each, not a copy:
// the copies of a request are bounded by its field limits times copied_max. A long entry of nghttp2's static table
// needs neither.
class header_text {
 public:
  static constexpr std::size_t block_size = 2048;
  static constexpr std::size_t copied_max = 64;

  header_text() = default;
  header_text(const header_text&) = delete;
  header_text& operator=(const header_text&) = delete;
  ~header_text() { clear(); }

  // text is b's bytes; the view returned stays valid until clear(). A short one is copied even when it is in
  // nghttp2's static table: asking cost a call for every field, more than the copies of the few that are.
  [[gnu::always_inline]] std::string_view keep(nghttp2_rcbuf* b, std::string_view text) {
    if (text.empty()) return {};  // nothing to copy (and no block yet to copy into: memcpy takes no null)
    if (text.size() > copied_max) return nghttp2_rcbuf_is_static(b) ? text : hold(b, text);
    if (text.size() > left_) grow();
    char* at = at_;
    // Most are of up to 32 bytes (a method, a path, an authority, a content type): copied without memcpy's call.
    if (text.size() <= 32) http::detail::copy_short(at, text.data(), text.size());
    else std::memcpy(at, text.data(), text.size());
    at_ += text.size();
    left_ -= text.size();
    return {at, text.size()};
  }
  void clear() noexcept;
  // Gives back the references and extra blocks, leaving the position for rewind() to reset before the next use.
  void release_held() noexcept;
  // After release_held(): the copies start again at the front of the first block.
  void rewind() noexcept {
    at_ = first_.get();
    left_ = first_ ? block_size : 0;
  }

 private:
  void grow();
  std::string_view hold(nghttp2_rcbuf* b, std::string_view text);

  // First, in the line of the stream its end reads anyway: whether there are references or blocks to give back.
  bool spilled_ = false;
  std::unique_ptr<char[]> first_;
  std::vector<std::unique_ptr<char[]>> more_;
  std::vector<nghttp2_rcbuf*> held_;
  char* at_ = nullptr;
  std::size_t left_ = 0;
};

// A request stream: what its handler reads and writes through (body_reader, response_stream), and the state
// nghttp2's callbacks fill. Streams are kept for reuse by the thread's connections (stream_pool), so a warm
// connection's request takes no allocation for them.
class server_stream final : public http::detail::exchange {
 public:
  explicit server_stream(server_connection& c) noexcept : conn_(&c), token_(stop_.get_token()) {}
  server_stream(const server_stream&) = delete;
  server_stream& operator=(const server_stream&) = delete;
  ~server_stream() {
    // Its loop's frame first: a handler still in it (only when the io_context is destroyed under the connection)
    // refers to the members below.
    loop_ = task<void>();
    release_memory();
    text_.clear();
  }

  task<io_result<std::size_t>> read_body_some(mutable_buffer b) override;
  bool body_done() const noexcept override { return in_end_ && buffered() == 0; }
  std::optional<std::uint64_t> body_length() const noexcept override;
  const http::field_list& body_trailers() const noexcept override { return trailer_list_; }
  task<std::error_code> send_head(http::response_stream& s, int status, const http::fields& f,
                                  std::optional<std::uint64_t> length) override;
  task<std::error_code> send_body(http::response_stream& s, const_buffer b) override;
  task<std::error_code> send_last(http::response_stream& s, const_buffer b) override;
  task<std::error_code> send_end(http::response_stream& s, const http::fields* trailers) override;

  std::size_t buffered() const noexcept { return in_.size(); }
  void signal_output() noexcept {
    output_signalled_ = true;
    output_.set();
  }
  std::size_t queued() const noexcept { return queued_end_ - out_taken_; }
  const char* queued_data() const noexcept { return queued_base_ + out_taken_; }
  // At the stream's end: gives back what its request held beyond what the stream keeps (the references to nghttp2's
  // buffers, a large body's pages, a large response buffer), touching only the lines that say whether it did.
  void release_memory() noexcept;
  // At its reuse: the state of the last request dropped (the memory is kept). Done as the next request begins, not
  // as the last one ends: with 100 streams in flight a stream's lines have left the cache by its end and are cold
  // again when the next request fills them, and a reset at the end cost them twice (1.6 KB rewritten per request).
  void reset_fields() noexcept;
  // A field of tern's own, after the peer's: k is its name's.
  void add_field(http::field f, http::detail::known_field k) {
    fields_.push_back(f);
    std::uint32_t& first = known_[static_cast<std::size_t>(k)];
    if (first == 0) first = static_cast<std::uint32_t>(fields_.size());
  }

  // In the order a request touches them: what every request reads and writes first (with 100 streams in flight,
  // 160 KB of streams, five times L1), then the request's view (its 256 bytes of route captures, written only by
  // routes with captures, left between), then what bodies, request trailers and response trailers use.
  server_connection* conn_;
  std::int32_t id_ = 0;
  std::size_t history_at_ = ~std::size_t{0};  // its entry in the connection's history (history_count_ then), if any
  server_stream* prev_ = nullptr;  // the connection's live streams, or the thread's kept ones (next_ only)
  server_stream* next_ = nullptr;
  server_stream* started_next_ = nullptr;  // the reader's handlers to run (server_connection::run_started)
  std::stop_source stop_;          // the handler's: requested when the stream closes under it
  // The coroutine that serves the stream's requests one after the other (server_connection::stream_loop), made with
  // the stream and destroyed with it; between requests it waits, suspended, for start_handler to queue its handle.
  task<void> loop_;

  // The request: its pseudo-header fields and fields are views into text_ (its copies and the buffers of
  // nghttp2's it holds), into nghttp2's static table, or (a known name) into tern::http's names.
  header_text text_;
  std::vector<http::field> fields_;
  http::detail::known_positions known_{};  // of fields_, as tern::http's parser keeps them (1-based, 0: none)
  http::request_head head_;
  std::string_view authority_;
  std::string_view protocol_;      // :protocol (RFC 8441 extended CONNECT)
  std::string_view content_length_text_;
  std::size_t header_bytes_ = 0;
  std::size_t pseudo_bytes_ = 0;   // :method and :path, held against the request-line limit
  std::size_t dropped_ = 0;        // fields past the limits, not kept
  int refused_ = 0;                // the status the head earned (431, 414) instead of its route's answer
  std::uint32_t close_code_ = 0;
  bool in_trailers_ = false;       // the fields now arriving are trailers
  bool websocket_ = false;         // an extended CONNECT for a WebSocket (RFC 8441): the stream is a tunnel
  bool has_content_length_ = false;
  bool in_end_ = false;
  bool expect_continue_ = false;
  bool shed_ = false;              // refused for the cap on parked bytes: what still arrives for it is dropped
  bool has_trailers_ = false;
  bool out_done_ = false;          // the body's last byte has been queued
  bool discard_ = false;           // HEAD, or a status without a body: what the handler writes is not sent
  bool deferred_ = false;          // nghttp2 waits for resume_data
  bool writer_waiting_ = false;    // the handler waits for room in out_
  bool lender_waiting_ = false;    // the handler waits for its lent bytes to be taken
  bool responded_ = false;         // a final response has been submitted
  bool streaming_ = false;         // its body is written piece by piece (counted in queued_out_)
  bool running_ = false;           // its handler has not ended
  bool closed_ = false;            // nghttp2 has closed it
  bool accumulating_ = false;      // a whole body waits for bytes, or for room among the held bodies
  bool in_line_ = false;           // a whole body in the connection's line for room (oldest first; line_prev_)
  bool output_signalled_ = false;  // output_ may have been set (signal_output): its line is read at the end only then
  bool stopped_ = false;           // a stop was requested of stop_ (read here, not in the source's shared state)
  clock::time_point body_start_{};

  // The request body's counts (below, its bytes): received and not yet read, those nghttp2 has not yet been told
  // were consumed (what the window is waiting for).
  std::size_t unconsumed_ = 0;
  std::size_t parked_ = 0;         // of unconsumed_: already given back to the connection's window (read_whole)
  std::size_t body_held_ = 0;      // of a whole body: bytes consumed and held (server_connection::held_bodies_)
  std::uint64_t in_total_ = 0;

  // The response: its body bytes queued and not yet taken by nghttp2 (from out_taken_ on), its trailers (last).
  std::string out_;
  // Its first 48 bytes in the line of out_ (both written as the handler answers), its last 16 in the next one's.
  std::optional<http::request> request_;  // the handler's view of the request (the last one's between requests)
  static_assert(std::is_trivially_destructible_v<http::request>);
  std::size_t out_taken_ = 0;
  // Where the queued bytes lie: in out_ (out_.data(), out_.size()), or, while write_last lends them, in the
  // handler's own buffer (out_ empty then; the handler waits, lender_waiting_, until nghttp2 has taken them all).
  // Set wherever out_ changes, so that reading them asks no question of which.
  const char* queued_base_ = out_.data();
  std::size_t queued_end_ = 0;
  std::uint64_t written_ = 0;
  std::optional<std::uint64_t> length_;

  sync::auto_reset_event input_;

  // The rest of the request body's state.
  body_buffer in_;
  server_stream* line_prev_ = nullptr;
  server_stream* line_next_ = nullptr;
  sync::auto_reset_event output_;  // set through signal_output

  // The request's trailers.
  std::vector<http::field> trailers_;
  http::field_list trailer_list_;

  // Last: most responses have no trailers, and the fields' inline storage (about 500 bytes) would otherwise sit
  // between the members every request touches.
  http::fields trailers_out_;

  // stop_'s token, which loop_ and what it awaits watch: replaced with stop_ (open_stream), so that every request's
  // handler watches the source of its own request. Read only where an operation registers for a stop.
  std::stop_token token_;
};

class server_connection final : public http::stop_listener {
 public:
  // A connection handed over by the server (h), served with opts and nghttp2's options option (both outlive it).
  server_connection(const http::handover& h, const server_options& opts, const nghttp2_option* option);
  server_connection(const server_connection&) = delete;
  server_connection& operator=(const server_connection&) = delete;
  ~server_connection();

  // Serves the connection until it ends (the caller closes the socket).
  task<void> run();
  void server_stopping() noexcept override;

  // For server_stream (its exchange), once it has checked and marked the response_stream.
  task<io_result<std::size_t>> read_body(server_stream& s, mutable_buffer b);
  task<std::error_code> start_response(server_stream& s, int status, const http::fields& f,
                                       std::optional<std::uint64_t> length);
  task<std::error_code> write_body(server_stream& s, const_buffer b);
  task<std::error_code> write_last(server_stream& s, const_buffer b);
  enum class output_wait : std::uint8_t { room, taken };
  task<std::error_code> wait_output(server_stream& s, output_wait what);
  void output_timed_out(server_stream& s);
  task<std::error_code> end_body(server_stream& s, const http::fields* trailers);

 private:
  friend struct callbacks;
  friend class server_stream;
  friend class stream_tunnel;

  // The plain socket's read (the reader's) and write (the writer's), awaited without a stop binding: a task's
  // await_transform wraps every cancellable operation in one, a stop_callback registered and unregistered around
  // each wait (115 to 160 instructions a read or a write, two per request with one stream at a time), and these
  // need none: the operation in flight is kept in slot while it waits, and end_connection and the watch
  // (write_timeout) cancel it there, on the loop, as the stop token did. Not a cancellable_operation (no cancel(),
  // no context()), so await_transform passes it through; the operations of TLS, tasks of the transport, stay
  // bound. A class with a constructor, not an aggregate: g++ 12 destroys an aggregate temporary of an awaiting
  // expression twice (design.md, "g++ 12 miscompiles two coroutine shapes"). make builds the operation in place;
  // a copy (g++ makes one of the awaiter await_transform returns) is a new operation, made before any has started.
  template <class Op>
  class [[nodiscard]] own_io {
   public:
    template <class Make>
    own_io(Op*& slot, Make&& make) noexcept : slot_(slot), op_(make()) {}
    bool await_ready() noexcept { return op_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      slot_ = &op_;
      if (op_.await_suspend(h)) return true;
      slot_ = nullptr;  // done at once
      return false;
    }
    io_result<std::size_t> await_resume() noexcept {
      slot_ = nullptr;
      return op_.await_resume();
    }

   private:
    Op*& slot_;
    Op op_;
  };

  bool start();
  bool upgrade_stream();
  task<void> read_loop();
  task<void> write_loop();
  task<void> linger();
  task<void> watch();
  std::optional<clock::time_point> read_deadline() const noexcept;
  void note_header_block(std::uint8_t type, std::uint8_t flags) noexcept;
  std::optional<clock::time_point> write_deadline() const noexcept;
  void on_write_deadline();
  bool feed(const char* data, std::size_t n);
  bool deliver(const char* data, std::size_t n);
  // Gathers frames while output_ has room; true when nghttp2 had nothing more to send.
  bool fill_output();
  // Room in output_ for one more frame within a write of write_size: a DATA frame of nghttp2's is at most 16 KiB
  // and its header (no read-length callback, no padding). Gathering went on while output_ was under write_size,
  // so a write of 16 KiB frames took four of them, 36 bytes past 64 KiB: a second send for those 36 bytes, and
  // a segment more on the loopback, in every write (strace: five sends per ten 16 KiB responses against the
  // floor's four). An empty output_ has room for any frame, whatever write_size is.
  bool output_has_room() const noexcept {
    constexpr std::size_t largest_data_frame = 16384 + 9;
    return output_.size() + largest_data_frame <= opts_.write_size || output_.empty();
  }
  // After every mem_recv and mem_send; usually with nothing to do (a shutdown sets stopping_ first).
  void after_session_calls() {
    if (!resets_.empty() || pending_consume_ != 0 || stopping_) make_deferred_calls();
  }
  void make_deferred_calls();
  void send_goaway(std::uint32_t code);
  // Rings once per turn of the writer: the reader, the callbacks and the handlers ring it several times per
  // request, and a ring while one is pending (the writer will gather everything in its next turn anyway) does
  // nothing more. A writer parked at its doorbell is queued to run; one waiting with a deadline is woken through
  // write_wanted_. Everything that rings runs on the connection's loop, as the writer does.
  void wake_writer() noexcept {
    if (write_rung_) return;
    write_rung_ = true;
    if (writer_parked_) {
      if (!writer_deferred_) ctx_.schedule_handle(std::exchange(writer_parked_, {}));  // else run_started resumes it
    } else if (writer_timed_) {
      write_wanted_.set();
    }
  }
  // The writer's wait for its doorbell when no deadline applies: its handle, which wake_writer queues, instead of
  // a wait on write_wanted_ (the event's lock and list, and the writer's stop token registered and unregistered,
  // at every wait: one per request with one stream at a time). Not stopped by the writer's token: end_connection
  // rings instead. Owns nothing (g++ 12, design.md).
  class [[nodiscard]] doorbell {
   public:
    explicit doorbell(server_connection& c) noexcept : c_(c) {}
    bool await_ready() const noexcept { return c_.write_rung_; }
    void await_suspend(std::coroutine_handle<> h) noexcept { c_.writer_parked_ = h; }
    void await_resume() const noexcept {}

   private:
    server_connection& c_;
  };
  void end_connection() noexcept;
  bool charge(std::size_t cost) noexcept;
  // The time a deadline starts from (a stream's start, the last DATA sent, the moment the connection went idle):
  // the loop's deadline clock, a counter read where it is usable, not a clock read per request; at most a few
  // microseconds late, which deadlines of seconds do not notice.
  clock::time_point stamp() noexcept {
    const std::chrono::nanoseconds ns(ctx_.deadline_now_ns());
    return clock::time_point(std::chrono::duration_cast<clock::duration>(ns));
  }
  // A handler's start, from which its body's deadline counts: under the reader's feed, the time the feed's first
  // handler started, for all of them (a read of 100 requests read the clock 100 times, 10 ns each, for deadlines
  // of seconds that a few microseconds do not move).
  clock::time_point start_stamp() noexcept {
    if (!reader_feeding_) return stamp();
    if (feed_stamp_ == clock::time_point{}) feed_stamp_ = stamp();
    return feed_stamp_;
  }

  // Streams.
  // The stream of id that nghttp2 holds (null once closed): from the connection's table of open streams by
  // identifier, else (another stream had its slot) from nghttp2's map, as its user data. A request's HEADERS and
  // DATA, their receipt, its answer's sending and its close each look their stream up: five lookups in the map per
  // request cost 165 instructions. Keeping the one found last saved most of them with one stream at a time, not
  // with 100 in flight, whose HEADERS arrive together before their DATA (three lookups in the map a request).
  static constexpr std::size_t by_id_size = 256;
  static std::size_t by_id_slot(std::int32_t id) noexcept {
    return (static_cast<std::uint32_t>(id) >> 1) % by_id_size;  // the peer's identifiers are odd
  }
  server_stream* find_stream(std::int32_t id) noexcept {
    server_stream* s = by_id_[by_id_slot(id)];
    if (s != nullptr && s->id_ == id && !s->closed_) return s;
    return static_cast<server_stream*>(nghttp2_session_get_stream_user_data(session_.get(), id));
  }
  server_stream* open_stream(std::int32_t id);
  void finish_head(server_stream& s);
  void start_handler(server_stream& s);
  void run_started();
  void stream_closed(server_stream& s, std::uint32_t code);
  // by_loop: s's own loop calls, at its handler's end (which cannot destroy the loop's running frame).
  void recycle(server_stream& s, bool by_loop = false) noexcept;
  void consume(server_stream& s, std::size_t n);
  void reset_stream(server_stream& s, std::uint32_t code);
  static task<void> stream_loop(server_stream& s);
  const http::router::route* route_of(server_stream& s);
  task<void> serve_streaming(server_stream& s, http::request& req, const http::router::route& route);
  bool whole_at_hand(server_stream& s, std::string_view& body, std::error_code& ec);
  task<std::error_code> read_whole(server_stream& s, std::string_view& body);
  void take_room(server_stream& s);
  std::size_t reserved_for_first() const noexcept;
  void join_line(server_stream& s) noexcept;
  void leave_line(server_stream& s) noexcept;
  void wake_accumulating() noexcept;
  bool park(server_stream& s, std::size_t n);
  std::size_t held_over() const noexcept;
  // Twice the connection window: several uploads may wait behind a first body without a refusal (seven 16 KiB
  // windows behind one over a 64 KiB connection window), and no more than that is held.
  std::size_t parked_cap() const noexcept { return 2 * std::size_t{opts_.connection_window}; }
  void shed(server_stream& s);
  task<void> tunnel(server_stream& s, http::response& r);
  clock::time_point body_deadline(const server_stream& s) const noexcept;
  void send_continue(server_stream& s);
  void respond(server_stream& s, http::response& r);
  void respond_status(server_stream& s, int status, std::string_view allow = {});
  bool submit_head(server_stream& s, int status, const http::fields& f, std::optional<std::uint64_t> length,
                   bool with_body);
  void resume(server_stream& s);
  void unqueue(std::size_t n) noexcept;
  std::size_t queued_cap() const noexcept { return 4 * opts_.write_size; }
  static ng_ssize read_out(nghttp2_session* session, std::int32_t id, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void* user);
  // A DATA frame that read_out left uncopied (NGHTTP2_DATA_FLAG_NO_COPY): its header and the stream's bytes put
  // straight into output_; NGHTTP2_ERR_PAUSE once output_ has no room for another frame.
  int write_data(const nghttp2_frame& frame, const std::uint8_t* framehd, std::size_t length, server_stream& s);
  // What nghttp2 has taken of a stream's queued bytes (n of them, from out_taken_): dropped, and the handler
  // waiting for room told when there is some.
  [[gnu::always_inline]] inline void took(server_stream& s, std::size_t n) noexcept;

  io_context& ctx_;
  http::server& server_;
  const http::server_options& hopts_;
  const server_options& opts_;
  const nghttp2_option* option_;
  net::tcp_socket& socket_;
  http::transport* secure_;
  const net::endpoint& remote_;
  std::string_view received_;
  const http::request_head* upgraded_;
  std::string_view upgraded_body_;
  std::string_view upgrade_settings_;
  http::stop_listener** listener_;

  session_ptr session_;
  std::unique_ptr<char[]> input_;
  std::string output_;              // frames gathered for the next write
  sync::auto_reset_event write_wanted_;  // the writer's doorbell while it waits with a deadline (writer_timed_)
  bool write_rung_ = false;         // the doorbell has rung since the writer's turn began (wake_writer)
  // The reader is feeding nghttp2: the handlers started are kept in started_first_.. for run_started, and a writer
  // at its doorbell is left there for it (writer_deferred_, cleared by run_started).
  bool reader_feeding_ = false;
  bool writer_deferred_ = false;
  server_stream* started_first_ = nullptr;
  server_stream* started_last_ = nullptr;
  bool writer_timed_ = false;       // the writer waits on write_wanted_ with a deadline
  std::coroutine_handle<> writer_parked_;  // the writer, waiting at its doorbell without one (doorbell)
  sync::auto_reset_event written_;  // a write has finished (the reader waits for it while output is stuck)
  bool reader_stuck_ = false;       // the reader waits on written_
  sync::auto_reset_event reader_done_;
  std::stop_source reader_stop_;
  std::stop_source writer_stop_;
  tern::detail::read_awaiter* read_op_ = nullptr;       // the reader's plain read while it waits (own_io)
  tern::detail::transfer_awaiter* write_op_ = nullptr;  // the writer's plain write while it waits (own_io)
  tern::detail::write_awaiter* send_op_ = nullptr;      // its single send, the usual write (write_loop)
  task_count tasks_;                // the reader, the writer and every stream's handler

  server_stream* live_ = nullptr;   // streams nghttp2 or a handler still uses
  stream_pool* pool_ = nullptr;     // the thread's streams kept for reuse (server_connection.cpp)
  server_stream* header_stream_ = nullptr;  // the stream of the header block being received
  // Open streams by identifier (find_stream): a stream that found its slot free at its opening holds it until it
  // is recycled; one that did not is nghttp2's user data instead.
  std::array<server_stream*, by_id_size> by_id_{};
  std::size_t live_count_ = 0;
  std::size_t handlers_ = 0;        // handlers running (a closed stream's included, until it ends)
  // Streams to reset once mem_recv or mem_send has returned: NO_ERROR after a response that came before the
  // request's end (RFC 9113 §8.1), REFUSED_STREAM for one beyond the handlers allowed.
  std::vector<std::pair<std::int32_t, std::uint32_t>> resets_;
  std::size_t queued_out_ = 0;      // streamed response bytes queued by every stream, not yet taken by nghttp2
  std::size_t whole_out_ = 0;       // whole responses' body bytes not yet taken by nghttp2 (a stall bound applies)
  std::size_t held_bodies_ = 0;     // whole bodies' bytes consumed and held by the streams (read_whole)
  std::size_t accumulating_ = 0;    // the streams whose accumulating_ is set (read_whole waits)
  server_stream* line_first_ = nullptr;  // the whole bodies still arriving, oldest first: room goes to the first
  server_stream* line_last_ = nullptr;
  std::size_t parked_bytes_ = 0;    // every stream's parked_, within parked_cap() (park)
  std::size_t pending_consume_ = 0; // connection window bytes of streams gone, to give back once calls return
  std::vector<nghttp2_nv> nva_;     // a head being submitted, when it has more fields than submit_head's frame holds

  // Misbehaviour: frames that cost the server and serve no request (empty DATA, PINGs, SETTINGS, resets, tiny
  // window updates, invalid frames) draw on a budget that refills over time; a peer that exhausts it gets GOAWAY
  // (ENHANCE_YOUR_CALM) and the connection ends.
  double budget_;
  clock::time_point budget_at_;

  // What became of the last streams the peer opened: a DATA or HEADERS frame for one that nghttp2 no longer holds
  // gets the error RFC 9113 §5.1 gives it (frame_on_gone_stream), deterministically, however long ago it closed.
  enum class ending : std::uint8_t { open, normally, peer_reset, reset_here };
  struct past_stream {
    std::int32_t id = 0;
    ending how = ending::open;
  };
  static constexpr std::size_t history_size = 128;
  void remember(std::int32_t id) noexcept;
  past_stream* recall(std::int32_t id) noexcept;
  void mark(std::int32_t id, ending how, const server_stream* s = nullptr) noexcept;
  void frame_on_gone_stream(std::int32_t id, std::uint8_t type);
  std::array<past_stream, history_size> history_{};
  std::size_t history_count_ = 0;   // streams remembered so far (the ring holds the last history_size)
  std::int32_t forgotten_ = 0;      // the highest stream no longer in the ring
  std::int32_t max_seen_ = 0;       // the highest stream a HEADERS frame has named
  // Where the peer's byte stream is: the client's 24-byte magic first, then frame headers and payloads.
  struct frame_scanner {
    std::uint8_t header[9];
    std::size_t have = 0;   // bytes of the current frame header
    std::size_t skip = 24;  // bytes to pass over: the magic, then each frame's payload
    // Of the frames whose headers have been scanned and not yet delivered: the stream a HEADERS frame opens,
    // whether one may close any stream (RST_STREAM, GOAWAY), and the streams they end (END_STREAM; past eight,
    // any stream may be closing).
    std::int32_t opened = 0;
    bool closing = false;
    std::array<std::int32_t, 8> ended_ids{};
    std::size_t ended_count = 0;
    bool ended(std::int32_t id) const noexcept {
      for (std::size_t k = 0; k < ended_count; ++k) {
        if (ended_ids[k] == id) return true;
      }
      return false;
    }
    void end(std::int32_t id) noexcept {
      if (ended_count < ended_ids.size()) ended_ids[ended_count++] = id;
      else closing = true;
    }
    // The bytes scanned so far have been delivered: nothing is pending any more.
    void restart() noexcept {
      opened = 0;
      closing = false;
      ended_count = 0;
    }
  };
  frame_scanner scanner_;

  clock::time_point started_;
  clock::time_point idle_since_;
  clock::time_point data_sent_at_;  // the last DATA frame sent
  bool data_gathered_ = false;      // DATA frames wait in output_ for the next write (which sets data_sent_at_)
  // The clock as the reader's feed started its first handler (start_stamp), {} until then.
  clock::time_point feed_stamp_{};
  std::int32_t max_stream_id_ = 0;  // the highest stream the peer opened
  bool got_frame_ = false;          // the peer's first frame has arrived (header_timeout no longer applies)
  clock::time_point header_block_at_{};  // when the header block still open began (header_timeout applies)
  bool stopping_ = false;           // the server stops: GOAWAY, then finish what is in flight
  bool notice_sent_ = false;        // the shutdown notice and a PING are on their way
  bool notice_ping_due_ = false;    // the notice has been sent: a second PING follows it
  bool notice_ping_sent_ = false;
  clock::time_point notice_at_{};   // when; cleared when the PING's answer arrives
  bool goaway_sent_ = false;        // the final GOAWAY has been submitted
  bool lingering_ = false;          // the writer has finished: what arrives now is dropped (linger)
  bool dead_ = false;               // the connection failed or ended: nothing more is read, written or served
  bool flush_on_death_ = false;     // but the GOAWAY nghttp2 queued for a flood still goes out
  bool writing_ = false;            // a write to the socket is in flight
  clock::time_point write_started_{};  // when (write_timeout, watch)
  bool write_timed_out_ = false;    // watch cancelled it
};

}  // namespace tern::http2::detail
