// Files (see tern/fs/file.hpp): the awaiters' checks and completions, open, statx conversion, the path calls and
// aligned buffers. The calls themselves are made by the backends (io_uring SQEs, or the blocking pool on epoll).
#include "tern/fs/file.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tern::fs {

namespace detail {

namespace {

// Direct I/O: buffer, offset and size on the file's alignment.
bool aligned(const file_state& s, const void* buf, std::uint64_t offset, std::size_t size) noexcept {
  if (s.offset_alignment == 0) return true;  // not opened for direct I/O
  const auto address = reinterpret_cast<std::uintptr_t>(buf);
  const bool offset_ok = offset == file_op::current_position || offset % s.offset_alignment == 0;
  return address % s.memory_alignment == 0 && offset_ok && size % s.offset_alignment == 0;
}

file_type type_of(mode_t mode) noexcept {
  switch (mode & S_IFMT) {
    case S_IFREG: return file_type::regular;
    case S_IFDIR: return file_type::directory;
    case S_IFLNK: return file_type::symlink;
    case S_IFBLK: return file_type::block_device;
    case S_IFCHR: return file_type::character_device;
    case S_IFIFO: return file_type::fifo;
    case S_IFSOCK: return file_type::socket;
    default: return file_type::unknown;
  }
}

std::chrono::system_clock::time_point time_of(const statx_timestamp& t) noexcept {
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
}

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U  // Linux 6.1; newer than some C libraries' headers
#endif

file_status status_of(const struct ::statx& s) noexcept {
  file_status f;
  f.type = type_of(s.stx_mode);
  f.size = s.stx_size;
  f.permissions = s.stx_mode & 07777;
  f.links = s.stx_nlink;
  f.uid = s.stx_uid;
  f.gid = s.stx_gid;
  f.inode = s.stx_ino;
  f.blocks = s.stx_blocks;
  f.block_size = s.stx_blksize;
  f.accessed = time_of(s.stx_atime);
  f.modified = time_of(s.stx_mtime);
  f.changed = time_of(s.stx_ctime);
  if ((s.stx_mask & STATX_DIOALIGN) != 0) {
    // stx_dio_mem_align and stx_dio_offset_align follow stx_mnt_id in the kernel's struct statx.
    std::uint32_t dio[2];
    std::memcpy(dio, reinterpret_cast<const unsigned char*>(&s.stx_mnt_id) + sizeof s.stx_mnt_id, sizeof dio);
    f.direct_memory_alignment = dio[0];
    f.direct_offset_alignment = dio[1];
  }
  return f;
}

}  // namespace

// A descriptor of ctx for fd, the file's own or adopted. FIFOs, sockets and terminals can keep a reader (or writer)
// waiting for ever: those the backend can watch are set up as a pipe's end is (non-blocking and watched under epoll),
// so that their reads and writes at the file's position wait for readiness (transfer_code). Regular files,
// directories, block devices and the devices epoll refuses (EPERM: /dev/null, /dev/zero, which never wait) are file
// calls, in blocking mode: flags (>= 0) are the file status flags to leave them with.
io_result<descriptor*> wrap_file(io_context& ctx, int fd, int flags_if_unpolled = -1) noexcept {
  struct ::stat st {};
  const bool may_wait = ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode));
  if (!may_wait) {
    if (flags_if_unpolled >= 0) ::fcntl(fd, F_SETFL, flags_if_unpolled);
    return tern::detail::wrap_fd(ctx, fd, false, false);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  const int wanted = ctx.backend() == backend_kind::epoll ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (flags < 0 || (wanted != flags && ::fcntl(fd, F_SETFL, wanted) < 0)) {
    const std::error_code ec(errno, std::system_category());
    ::close(fd);
    return {ec, nullptr};
  }
  try {
    return {{}, ctx.open_descriptor(fd, true)};
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::operation_not_permitted) {
      ::close(fd);
      return {e.code(), nullptr};
    }
  } catch (...) {
    ::close(fd);
    return {std::make_error_code(std::errc::not_enough_memory), nullptr};
  }
  // A device epoll cannot watch: file calls, in the mode it came in (or was asked for).
  ::fcntl(fd, F_SETFL, flags_if_unpolled >= 0 ? flags_if_unpolled : flags);
  return tern::detail::wrap_fd(ctx, fd, false, false);
}

bool file_io_awaiter::await_ready() noexcept {
  if (refused(true) || refused_buffer()) return true;
  if (!aligned(state_, op_.buf, op_.offset, op_.len)) {
    op_.res = -EINVAL;
    misaligned_ = true;
    return true;
  }
  return false;
}

file_transfer_awaiter::file_transfer_awaiter(io_context& ctx, descriptor* d, op_code code, void* base,
                                             std::size_t size, std::uint64_t offset, file_state state) noexcept
    : file_op_awaiter(ctx, d, transfer_code(d, code, offset)),
      base_(static_cast<unsigned char*>(base)),
      size_(size),
      offset_(offset),
      state_(state) {
  op_.run = &on_piece;
  op_.owner = this;
}

file_transfer_awaiter::file_transfer_awaiter(const file_transfer_awaiter& o) noexcept
    : file_transfer_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code, o.base_, o.size_, o.offset_, o.state_) {
  op_.buf_index = o.op_.buf_index;
  buffer_loop_ = o.buffer_loop_;
}

bool file_transfer_awaiter::await_ready() noexcept {
  if (refused(true) || refused_buffer()) {
    ec_ = error();
    return true;
  }
  if (!aligned(state_, base_, offset_, size_)) {
    ec_ = make_error_code(tern::error::misaligned);
    return true;
  }
  return size_ == 0;
}

bool file_transfer_awaiter::issue() noexcept {
  for (;;) {
    const std::size_t rest = size_ - done_;
    op_.buf = base_ + done_;
    op_.len = static_cast<std::uint32_t>(rest < tern::detail::max_op_len ? rest : tern::detail::max_op_len);
    op_.offset = offset_ == file_op::current_position ? offset_ : offset_ + done_;
    if (!op_.ctx->start(op_)) return false;  // pending
    if (finish_piece()) return true;
  }
}

bool file_transfer_awaiter::finish_piece() noexcept {
  const int res = op_.res;
  if (res < 0) {
    ec_ = tern::detail::result_error(res);
    return true;
  }
  if (res == 0) {
    // A read at the end of the file; a write that moved nothing (a full device reports ENOSPC instead).
    const bool read = op_.code == op_code::read_at || op_.code == op_code::read;
    ec_ = read ? make_error_code(tern::error::eof) : std::make_error_code(std::errc::io_error);
    return true;
  }
  done_ += static_cast<std::size_t>(res);
  if (done_ == size_) return true;
  if (canceled_) {
    ec_ = make_error_code(tern::error::operation_canceled);
    return true;
  }
  return false;
}

void file_transfer_awaiter::on_piece(tern::detail::work_item* w) {
  auto* self = static_cast<file_transfer_awaiter*>(static_cast<file_op*>(w)->owner);
  if (self->finish_piece() || self->issue()) self->op_.handle.resume();
}

stat_awaiter::stat_awaiter(io_context& ctx, descriptor* d, const char* path, bool follow_symlinks) noexcept
    : file_op_awaiter(ctx, path[0] == '\0' ? d : nullptr, op_code::statx) {
  op_.path = path;
  op_.flags = (path[0] == '\0' ? AT_EMPTY_PATH : 0) | (follow_symlinks ? 0 : AT_SYMLINK_NOFOLLOW);
  op_.mode = STATX_BASIC_STATS | STATX_DIOALIGN;
  op_.buf = &result_;
}

io_result<file_status> stat_awaiter::await_resume() const noexcept {
  if (op_.res < 0) return {error(), {}};
  return {{}, status_of(result_)};
}

open_awaiter::open_awaiter(io_context& ctx, const char* path, open_options opts)
    : file_op_awaiter(ctx, nullptr, op_code::openat), path_(path), direct_(opts.direct) {
  int flags = O_CLOEXEC;
  switch (opts.access) {
    case open_options::read_only: flags |= O_RDONLY; break;
    case open_options::write_only: flags |= O_WRONLY; break;
    case open_options::read_write: flags |= O_RDWR; break;
  }
  if (opts.create) flags |= O_CREAT;
  if (opts.exclusive) flags |= O_EXCL;
  if (opts.truncate) flags |= O_TRUNC;
  if (opts.append) flags |= O_APPEND;
  if (opts.direct) flags |= O_DIRECT;
  if (opts.dsync) flags |= O_DSYNC;
  if (ctx.backend() == backend_kind::epoll) {
    flags |= O_NONBLOCK;
    nonblocking_ = true;
  }
  op_.path = path_.c_str();
  op_.flags = flags;
  op_.mode = opts.mode;
  op_.run = &on_opened;
  op_.owner = this;
}

bool open_awaiter::issue() noexcept {
  for (;;) {
    if (!op_.ctx->start(op_)) return false;  // pending
    if (!retry_blocking()) return true;
  }
}

bool open_awaiter::retry_blocking() noexcept {
  if (!nonblocking_ || op_.res != -EAGAIN || op_.st == tern::detail::io_op::state::cancelled) return false;
  op_.flags &= ~O_NONBLOCK;
  nonblocking_ = false;
  return true;
}

void open_awaiter::on_opened(tern::detail::work_item* w) {
  auto* self = static_cast<open_awaiter*>(static_cast<file_op*>(w)->owner);
  if (self->retry_blocking() && !self->issue()) return;
  self->op_.handle.resume();
}

io_result<file> open_awaiter::await_resume() noexcept {
  io_context& ctx = *op_.ctx;
  if (op_.res < 0) return {error(), file(ctx)};
  const int fd = op_.res;
  file_state state;
  if (direct_) {
    // The alignment direct I/O needs here. A metadata call on an open descriptor: no device access.
    struct ::statx s {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &s) == 0) {
      const file_status st = status_of(s);
      state.memory_alignment = st.direct_memory_alignment;
      state.offset_alignment = st.direct_offset_alignment;
    }
    if (state.offset_alignment == 0) {
      // The file system does not say: the logical block size of every device today.
      state.memory_alignment = state.offset_alignment = 512;
    }
  }
  auto [ec, d] = wrap_file(ctx, fd, nonblocking_ ? op_.flags & ~O_NONBLOCK : -1);
  if (ec) return {ec, file(ctx)};
  return {{}, file(ctx, d, state)};
}

}  // namespace detail

// ---- file ----

detail::open_awaiter file::open(io_context& ctx, const char* path, open_options opts) {
  return {ctx, path, opts};
}
detail::open_awaiter file::open(io_context& ctx, const std::string& path, open_options opts) {
  return {ctx, path.c_str(), opts};
}
detail::open_awaiter file::open(io_context& ctx, const std::filesystem::path& path, open_options opts) {
  return {ctx, path.c_str(), opts};
}

std::error_code file::register_file() noexcept { return register_descriptor(); }

io_result<file> file::adopt(io_context& ctx, unique_fd fd) noexcept {
  auto [ec, d] = detail::wrap_file(ctx, fd.release());
  if (ec) return {ec, file(ctx)};
  return {{}, file(ctx, d, {})};
}

// ---- path calls ----

detail::path_stat_awaiter status(io_context& ctx, const char* path, bool follow_symlinks) {
  return {ctx, path, follow_symlinks};
}

detail::path_call_awaiter rename(io_context& ctx, const char* from, const char* to) {
  return {ctx, detail::op_code::renameat, from, to};
}

detail::path_call_awaiter remove(io_context& ctx, const char* path, bool directory) {
  detail::path_call_awaiter a(ctx, detail::op_code::unlinkat, path);
  a.op().flags = directory ? AT_REMOVEDIR : 0;
  return a;
}

detail::path_call_awaiter create_directory(io_context& ctx, const char* path, mode_t mode) {
  detail::path_call_awaiter a(ctx, detail::op_code::mkdirat, path);
  a.op().mode = mode;
  return a;
}

// ---- aligned_buffer ----

aligned_buffer::aligned_buffer(std::size_t size, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) alignment = 4096;
  size_ = (size + alignment - 1) / alignment * alignment;
  if (size_ == 0) return;
  data_ = static_cast<std::byte*>(std::aligned_alloc(alignment, size_));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, size_);
}

aligned_buffer& aligned_buffer::operator=(aligned_buffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

aligned_buffer::~aligned_buffer() { std::free(data_); }

}  // namespace tern::fs
