// send_file (see tern/net/send_file.hpp): the splice pair of io_uring and the sendfile loop of epoll, chained from
// each piece's completion so the caller is resumed once.
#include "tern/net/send_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "tern/detail/op_awaiter.hpp"
#include "tern/fs/pipe.hpp"

namespace tern::net::detail {

namespace {
// One piece: at most this much per splice or sendfile, so progress and cancellation are seen regularly.
constexpr std::uint64_t piece = 1 << 20;
}  // namespace

send_file_awaiter::send_file_awaiter(basic_stream_socket& socket, fs::file& file, std::uint64_t offset,
                                     std::uint64_t count) noexcept
    : file_fd_(file.native_handle()), offset_(offset), count_(count) {
  op_.ctx = &socket.context();
  op_.desc = socket.descriptor();
  op_.run = &on_piece;
  op_.self = this;
}

send_file_awaiter::send_file_awaiter(const send_file_awaiter& o) noexcept
    : file_fd_(o.file_fd_), offset_(o.offset_), count_(o.count_) {
  op_.ctx = o.op_.ctx;
  op_.desc = o.op_.desc;
  op_.run = &on_piece;
  op_.self = this;
}

send_file_awaiter::~send_file_awaiter() {
  op_.ctx->forget(op_);
  for (int fd : pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

bool send_file_awaiter::await_ready() noexcept {
  if (const int refused = tern::detail::refusal(*op_.ctx, op_.desc)) {
    ec_ = tern::detail::result_error(refused);
    return true;
  }
  if (file_fd_ < 0) {
    ec_ = std::make_error_code(std::errc::bad_file_descriptor);
    return true;
  }
  fs::detail::block_sigpipe();
  if (count_ == 0) return true;
  if (op_.ctx->backend() == backend_kind::io_uring && !op_.ctx->take_pipe(pipe_)) {
    ec_ = {errno, std::system_category()};
    pipe_[0] = pipe_[1] = -1;
    return true;
  }
  return false;
}

bool send_file_awaiter::issue() noexcept {
  for (;;) {
    if (op_.ctx->backend() == backend_kind::io_uring) {
      op_.code = tern::detail::op_code::splice;
      if (into_pipe_) {
        const std::uint64_t rest = count_ - sent_;
        op_.fd_in = file_fd_;
        op_.off_in = static_cast<std::int64_t>(offset_ + sent_);
        op_.fd_out = pipe_[1];
        op_.len = static_cast<std::uint32_t>(rest < piece ? rest : piece);
      } else {
        op_.fd_in = pipe_[0];
        op_.off_in = -1;
        op_.fd_out = op_.desc->fd;
        op_.len = in_pipe_;
      }
    } else {
      const std::uint64_t rest = count_ - sent_;
      op_.code = tern::detail::op_code::sendfile;
      op_.fd_in = file_fd_;
      op_.off_in = static_cast<std::int64_t>(offset_ + sent_);
      op_.len = static_cast<std::uint32_t>(rest < piece ? rest : piece);
    }
    if (!op_.ctx->start(op_)) return false;  // pending
    if (finish_piece()) return true;
  }
}

bool send_file_awaiter::finish_piece() noexcept {
  const int res = op_.res;
  if (res < 0) {
    ec_ = tern::detail::result_error(res);
    if (ec_ == std::errc::broken_pipe) fs::detail::discard_sigpipe();
    release_pipe();
    return true;
  }
  const bool reading_file = op_.code == tern::detail::op_code::sendfile || into_pipe_;
  if (res == 0 && reading_file) {
    ec_ = make_error_code(tern::error::eof);  // the file ended first
    release_pipe();
    return true;
  }
  if (op_.code == tern::detail::op_code::sendfile) {
    sent_ += static_cast<std::uint64_t>(res);
  } else if (into_pipe_) {
    in_pipe_ = static_cast<std::uint32_t>(res);
    into_pipe_ = false;
  } else {
    in_pipe_ -= static_cast<std::uint32_t>(res);
    sent_ += static_cast<std::uint64_t>(res);
    if (in_pipe_ == 0) into_pipe_ = true;
  }
  if (sent_ == count_ || canceled_) {
    if (sent_ != count_) ec_ = make_error_code(tern::error::operation_canceled);
    release_pipe();
    return true;
  }
  return false;
}

void send_file_awaiter::release_pipe() noexcept {
  if (pipe_[0] < 0) return;
  // Every splice of the transfer has completed here. in_pipe_ counts what went into the pipe and not out: a
  // splice out that failed or was cancelled midway leaves bytes that would reach the next call's socket first.
  if (in_pipe_ == 0) {
    op_.ctx->give_pipe(pipe_);
  } else {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  pipe_[0] = pipe_[1] = -1;
}

void send_file_awaiter::on_piece(tern::detail::work_item* w) {
  send_file_awaiter* self = static_cast<piece_op*>(w)->self;
  if (self->finish_piece() || self->issue()) self->op_.handle.resume();
}

}  // namespace tern::net::detail
