// tern/ws/outbox.hpp
//
// ws::outbox: messages for one WebSocket sent from any task on any worker, with a bounded queue and backpressure.
// A ws::stream belongs to its loop; a task of another worker cannot write to it directly. It sends through a
// ws::sender instead, a copyable handle onto a bounded sync::channel, and one task of the stream's loop writes what
// the queue holds (stream::write_from):
//
//   ws::outbox box(64);                                  // room for 64 messages
//   tern::spawn(ctx, ws_stream.write_from(box)).detach();  // on the stream's loop, while the stream lives
//   ws::sender to_client = box.sender();                 // copy it to any worker
//   ...
//   std::error_code ec = co_await to_client.send(ws::message_type::text, "tick");  // from any worker
//
// The queue is shared: the outbox, its senders and a running write_from() each hold it, so any of them may go
// first (write_from() takes its outbox by value). The stream is not: it must outlive write_from(), as it must any
// of its operations (close the outbox, or let the connection fail, and await the writer before the stream goes).
//
// send() completes once the message is queued: at once while there is room, else when the writer has taken one
// (so a producer faster than the connection waits instead of growing memory); it is cancellable like any channel
// send, and with_timeout(to.send(...), d) bounds the wait. try_send() never waits: sync::error::full says the
// queue is full, which is how a broadcast tells a reader too slow for it and drops it (close(), and forget the
// sender) instead of waiting for it with every other reader. Sends fail with sync::error::closed once the outbox
// was closed (close() of the outbox or of any sender) or write_from() ended, however it ended (the connection
// failed, the writer was cancelled, or its loop went away): what was queued and not yet written is then dropped.
// A message owns its bytes (a std::string), so the producer's buffer is free as soon as the send returns. Messages
// from one sender are written in the order their sends completed; writes of the stream's own loop (write, ping,
// close) take turns with them.
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
  // Queues a message if there is room now, never waiting: empty, sync::error::full (the writer is behind by the
  // outbox's capacity: the peer reads too slowly) or sync::error::closed. The payload is dropped when refused.
  [[nodiscard]] std::error_code try_send(message_type t, std::string payload) const {
    return box_->try_send(queued_message{t, std::move(payload)});
  }
  // Closes the outbox, as outbox::close() does: for a producer that gives up on this reader. Any thread. True if
  // this call closed it.
  bool close() const noexcept { return box_->close(); }

 private:
  friend class outbox;
  explicit sender(std::shared_ptr<sync::channel<queued_message>> box) noexcept : box_(std::move(box)) {}
  std::shared_ptr<sync::channel<queued_message>> box_;
};

class outbox {
 public:
  // An outbox with room for capacity messages (at least 1).
  explicit outbox(std::size_t capacity) : box_(std::make_shared<sync::channel<queued_message>>(capacity)) {}

  // A handle for senders. Any thread.
  ws::sender sender() const { return ws::sender(box_); }
  // Refuses further sends and wakes those waiting; write_from() writes what is queued, then returns. Any thread.
  // True if this call closed it.
  bool close() noexcept { return box_->close(); }
  // Messages queued and not yet taken by the writer.
  std::size_t size() const noexcept { return box_->size(); }

  // The queue itself (what write_from() takes the messages from).
  sync::channel<queued_message>& channel() noexcept { return *box_; }

 private:
  std::shared_ptr<sync::channel<queued_message>> box_;
};

}  // namespace tern::ws
