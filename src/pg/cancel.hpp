// Cancel requests (see cancel.cpp): what one needs, read from libpq, and sending one on the loop.
#pragma once

#include <libpq-fe.h>

#include <sys/socket.h>

#include <cstdint>
#include <memory>

#include "tern/io_context.hpp"

namespace tern::pg::detail {

// Where the server is, and the backend's process id and secret key.
struct cancel_target {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::int32_t pid = 0;
  std::int32_t key = 0;
  bool valid = false;
  // Where the layout of libpq's PGcancel could not be checked: PGcancel itself, for PQcancel on a thread.
  std::shared_ptr<pg_cancel> fallback;
};

// The cancel target of a connected PGconn: valid, or a fallback when libpq's PGcancel could not be read (cancel.cpp).
cancel_target read_cancel_target(PGconn* pg) noexcept;

// Sends a cancel request for t's backend from a task of its own on ctx (it does not wait for it). landed(arg) is
// called on ctx once the server has closed the request's connection (it has signalled the backend by then), or the
// request failed, or ctx was torn down with it unfinished (the PQcancel fallback too: a task on ctx follows its
// thread); at once when no request is made (no PGcancel, no memory).
void send_cancel_request(io_context& ctx, const cancel_target& t, void (*landed)(void*) noexcept, void* arg) noexcept;

}  // namespace tern::pg::detail
