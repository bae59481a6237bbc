// tern/ws/outbox.hpp
//
// ws::outbox: messages for one WebSocket sent from any task on any worker, with a bounded queue and backpressure.
// A ws::stream belongs to its loop; a task of another worker cannot write to it directly. It sends through a
// ws::sender instead, a copyable handle onto a bounded sync::channel, and one task of the stream's loop writes what
// the queue holds (stream::write_from):
//
//   ws::outbox box(64);                                  // room for 64 messages
//   tern::spawn(ctx, ws_stream.write_from(box)).detach();  // on the stream's loop, for the connection's life
//   ws::sender to_client = box.sender();                 // copy it to any worker
//   ...
//   std::error_code ec = co_await to_client.send(ws::message_type::text, "tick");  // from any worker
//
// send() completes once the message is queued: at once while there is room, else when the writer has taken one
// (so a producer faster than the connection waits instead of growing memory); it is cancellable like any channel
// send. It fails with sync::error::closed once box.close() was called or write_from() ended (the connection
// failed or closed): what was queued and not yet written is dropped. A message owns its bytes (a std::string), so
// the producer's buffer is free as soon as send() returns. Messages from one sender are written in the order
// their sends completed; writes of the stream's own loop (write, ping, close) take turns with them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "tern/sync/channel.hpp"
#include "tern/task.hpp"
#include "tern/ws/detail/core.hpp"

namespace tern::ws {

// A message on its way through an outbox.
struct queued_message {
  message_type type = message_type::binary;
  std::string payload;
};

// A handle for sending through an outbox; copyable, usable from any thread.
class sender {
 public:
  // Awaitable: queues a message (waiting while the outbox is full); yields std::error_code (sync::error::closed
  // once the outbox is closed).
  task<std::error_code> send(message_type t, std::string payload) const {
    // A named message, not a temporary inside the co_await: g++ 12 destroys such a temporary twice.
    queued_message m{t, std::move(payload)};
    co_return co_await box_->send(std::move(m));
  }

 private:
  friend class outbox;
  explicit sender(std::shared_ptr<sync::channel<queued_message>> box) noexcept : box_(std::move(box)) {}
  std::shared_ptr<sync::channel<queued_message>> box_;
};

class outbox {
 public:
  // An outbox with room for capacity messages (at least 1).
  explicit outbox(std::size_t capacity) : box_(std::make_shared<sync::channel<queued_message>>(capacity)) {}

  // A handle for senders; it may outlive the outbox (its sends then fail with closed).
  ws::sender sender() const { return ws::sender(box_); }
  // Refuses further sends and wakes those waiting; write_from() returns once the queue is empty.
  void close() noexcept { box_->close(); }
  // Messages queued and not yet taken by the writer.
  std::size_t size() const noexcept { return box_->size(); }

  sync::channel<queued_message>& channel() noexcept { return *box_; }

 private:
  std::shared_ptr<sync::channel<queued_message>> box_;
};

}  // namespace tern::ws
