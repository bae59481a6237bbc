// tern/fs/file.hpp
//
// Files: fs::file (open, positioned and sequential reads and writes, sync, allocate, truncate, stat) and the path
// operations (status, rename, remove, create_directory).
//
// One API on both backends. io_uring runs every call as an SQE of the loop's ring; epoll cannot poll files, so
// there each call runs on the blocking pool (detail/blocking_pool.hpp: a few threads per process, started on
// first use) and its completion comes back to the loop.
//
// FIFOs, sockets and terminals (character devices the backend can watch) may keep a read or a write waiting for
// ever. A file opened onto one, or adopted, is set up as a pipe's end is (fs/pipe.hpp): its reads and writes at the
// file's own position (read_some, write_some, read_exact, write_all) wait for readiness under epoll and in the ring
// under io_uring, never on a pool thread, so a timeout, a stop or the loop's teardown ends them like a socket's.
// Opening never waits for a FIFO's other end, on either backend: a reader opens at once, a writer without a reader
// fails with ENXIO (std::errc::no_such_device_or_address); a reader that must wait for writers opens the FIFO
// read_write. What can still hold a pool thread under epoll is a call the kernel itself makes wait (an open that
// breaks a lease, a slow device), which cancellation cannot interrupt once it has started. Either way an operation is an awaiter holding its state,
// so it allocates nothing (on io_uring, not even on a first call), takes stop tokens, cancel() and with_timeout
// like every other operation, and reports errors as std::error_code: no such file, permission denied, no space,
// a read past the end of the file (tern::error::eof), a descriptor table that is full (too_many_files_open).
// Cancelling a call that has already started (a blocking pool thread is inside it, or io_uring issued it) lets it
// finish with its own result.
//
// Direct I/O (open_options::direct, O_DIRECT) bypasses the page cache and requires the buffer address, the
// offset and the size to be multiples of the file's direct-I/O alignment (direct_alignment(), from statx): an
// operation that breaks it completes at once with tern::error::misaligned instead of the kernel's bare EINVAL.
// fs::aligned_buffer gives suitably aligned memory.
//
// Registered files and buffers (io_uring): register_file() puts the file in its loop's table of registered files,
// and its reads, writes and syncs then name the table slot (IOSQE_FIXED_FILE) instead of the descriptor, which
// saves the kernel a descriptor lookup and reference per call; close() gives the slot back. read_at and friends
// with an fs::registered_buffer (fs/registered_buffers.hpp) are READ_FIXED/WRITE_FIXED. Under epoll both are
// accepted and change nothing: register_file() succeeds without registering, and registered buffers are plain
// memory. A registered buffer of another loop's set is refused with wrong_loop.
//
// Lifetimes: an operation copies the paths it is given (temporaries are fine, whenever it is awaited); the buffers
// it reads into or writes from are the caller's and must outlive it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>

#include "tern/basic_descriptor.hpp"
#include "tern/buffer.hpp"
#include "tern/detail/io_op.hpp"
#include "tern/detail/op_awaiter.hpp"
#include "tern/detail/stream_ops.hpp"
#include "tern/error.hpp"
#include "tern/fs/registered_buffers.hpp"
#include "tern/io_context.hpp"
#include "tern/io_result.hpp"
#include "tern/unique_fd.hpp"

namespace tern::fs {

struct open_options {
  enum access_mode { read_only, write_only, read_write };
  access_mode access = read_only;
  bool create = false;     // O_CREAT: make the file (with mode) if it does not exist
  bool exclusive = false;  // O_EXCL, with create: fail with file_exists if it does
  bool truncate = false;   // O_TRUNC: empty the file
  bool append = false;     // O_APPEND: every write goes to the end
  bool direct = false;     // O_DIRECT: bypass the page cache (aligned buffers, offsets and sizes)
  bool dsync = false;      // O_DSYNC: each write reaches the device before it completes
  mode_t mode = 0644;      // for a file that create makes (before the umask)
};

enum class file_type { unknown, regular, directory, symlink, block_device, character_device, fifo, socket };

struct file_status {
  file_type type = file_type::unknown;
  std::uint64_t size = 0;
  mode_t permissions = 0;  // the permission bits (07777)
  std::uint64_t links = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint64_t inode = 0;
  std::uint64_t blocks = 0;        // 512-byte blocks allocated
  std::uint32_t block_size = 0;    // the preferred I/O size
  std::chrono::system_clock::time_point accessed, modified, changed;
  // Direct I/O: the alignment of buffer addresses and of offsets and sizes; 0 when the file system does not say.
  std::uint32_t direct_memory_alignment = 0;
  std::uint32_t direct_offset_alignment = 0;
};

namespace detail {

using tern::detail::descriptor;
using tern::detail::file_op;
using tern::detail::op_code;

// The call a read or write at offset makes. On a descriptor the backend watches (a FIFO, a socket or a terminal:
// see file::open), one at the file's own position is a pipe's read or write, which waits for readiness (epoll) or in
// the ring (io_uring), so a timeout, a stop or the loop's teardown ends it; everything else is a file call.
inline op_code transfer_code(const descriptor* d, op_code code, std::uint64_t offset) noexcept {
  if (d == nullptr || d->unpolled || offset != file_op::current_position) return code;
  if (code == op_code::read_at) return op_code::read;
  if (code == op_code::write_at) return op_code::write;
  return code;
}

// A path copied into its awaiter: up to inline_size bytes in place, a longer one on the heap.
class path_copy {
 public:
  explicit path_copy(const char* p) {
    const std::size_t n = std::char_traits<char>::length(p) + 1;
    char* to = inline_;
    if (n > inline_size) {
      heap_ = std::make_unique_for_overwrite<char[]>(n);
      to = heap_.get();
    }
    std::char_traits<char>::copy(to, p, n);
  }
  path_copy(const path_copy& o) : path_copy(o.c_str()) {}
  path_copy& operator=(const path_copy&) = delete;
  const char* c_str() const noexcept { return heap_ ? heap_.get() : inline_; }

 private:
  static constexpr std::size_t inline_size = 120;
  char inline_[inline_size];
  std::unique_ptr<char[]> heap_;
};

// File operations that do not fit a descriptor's state (what the ops below check before they start).
struct file_state {
  std::uint32_t memory_alignment = 0;  // direct I/O: required alignments (0: no direct I/O)
  std::uint32_t offset_alignment = 0;
};

// The common part of every file awaiter: the file_op, cancel(), context(), and the check that the operation is
// awaited on its loop's thread.
class [[nodiscard]] file_op_awaiter {
 public:
  file_op_awaiter(io_context& ctx, descriptor* d, op_code code) noexcept {
    op_.ctx = &ctx;
    op_.desc = d;
    op_.code = code;
  }
  file_op_awaiter(const file_op_awaiter& o) noexcept : file_op_awaiter(*o.op_.ctx, o.op_.desc, o.op_.code) {
    copy_fields(o);
    buffer_loop_ = o.buffer_loop_;
  }
  file_op_awaiter& operator=(const file_op_awaiter&) = delete;
  ~file_op_awaiter() { op_.ctx->forget(op_); }

  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !op_.ctx->start(op_);
  }
  // Requests cancellation while suspended: a call not started yet completes with operation_canceled.
  void cancel() noexcept { op_.ctx->cancel(op_); }
  io_context& context() const noexcept { return *op_.ctx; }

 protected:
  // Refuses the operation before it starts (wrong thread, closed file): true, with res set.
  bool refused(bool needs_descriptor) noexcept {
    if (!op_.ctx->running_here()) {
      op_.res = tern::detail::wrong_loop_res;
      return true;
    }
    if (needs_descriptor && op_.desc == nullptr) {
      op_.res = -EBADF;
      return true;
    }
    return false;
  }
  std::error_code error() const noexcept { return tern::detail::result_error(op_.res); }
  void copy_fields(const file_op_awaiter& o) noexcept {
    op_.buf = o.op_.buf;
    op_.len = o.op_.len;
    op_.res = o.op_.res;
    op_.offset = o.op_.offset;
    op_.length = o.op_.length;
    op_.path = o.op_.path;
    op_.path2 = o.op_.path2;
    op_.mode = o.op_.mode;
    op_.flags = o.op_.flags;
    op_.buf_index = o.op_.buf_index;
  }
  // A registered buffer: its slot goes into the op (READ_FIXED/WRITE_FIXED); refused_buffer() checks its loop.
  void use_registered(const registered_buffer& b) noexcept {
    op_.buf_index = b.index();
    buffer_loop_ = b.context();
  }
  // The registered buffer belongs to another loop than the file: wrong_loop, with res set.
  bool refused_buffer() noexcept {
    if (buffer_loop_ == nullptr || buffer_loop_ == op_.ctx) return false;
    op_.res = tern::detail::wrong_loop_res;
    return true;
  }

  file_op op_;
  io_context* buffer_loop_ = nullptr;  // the loop of a registered buffer's set; null for plain memory
};

// read_at / write_at: one positioned call. A read at or past the end of the file is eof.
class [[nodiscard]] file_io_awaiter : public file_op_awaiter {
 public:
  file_io_awaiter(io_context& ctx, descriptor* d, op_code code, void* buf, std::size_t len, std::uint64_t offset,
                  file_state state) noexcept
      : file_op_awaiter(ctx, d, transfer_code(d, code, offset)), state_(state) {
    op_.buf = buf;
    op_.len = len > tern::detail::max_op_len ? tern::detail::max_op_len : static_cast<std::uint32_t>(len);
    op_.offset = offset;
  }
  file_io_awaiter(io_context& ctx, descriptor* d, op_code code, const registered_buffer& b, std::uint64_t offset,
                  file_state state) noexcept
      : file_io_awaiter(ctx, d, code, b.data(), b.size(), offset, state) {
    use_registered(b);
  }
  bool await_ready() noexcept;
  io_result<std::size_t> await_resume() const noexcept {
    if (misaligned_) return {make_error_code(error::misaligned), 0};
    if (op_.res < 0) return {error(), 0};
    if (op_.res == 0 && op_.len != 0 && (op_.code == op_code::read_at || op_.code == op_code::read)) {
      return {make_error_code(error::eof), 0};
    }
    return {{}, static_cast<std::size_t>(op_.res)};
  }

 private:
  file_state state_;
  bool misaligned_ = false;
};

// read_exact_at / write_all_at: the positioned call issued again for the rest after each partial transfer, from
// the op's own completion (one resumption at the end, as transfer_awaiter does for streams). The result counts
// the bytes moved, also on error; a read that meets the end of the file first is eof.
class [[nodiscard]] file_transfer_awaiter : public file_op_awaiter {
 public:
  file_transfer_awaiter(io_context& ctx, descriptor* d, op_code code, void* base, std::size_t size,
                        std::uint64_t offset, file_state state) noexcept;
  file_transfer_awaiter(io_context& ctx, descriptor* d, op_code code, const registered_buffer& b,
                        std::uint64_t offset, file_state state) noexcept
      : file_transfer_awaiter(ctx, d, code, b.data(), b.size(), offset, state) {
    use_registered(b);
  }
  file_transfer_awaiter(const file_transfer_awaiter& o) noexcept;
  bool await_ready() noexcept;
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !issue();
  }
  io_result<std::size_t> await_resume() const noexcept { return {ec_, done_}; }
  void cancel() noexcept {
    canceled_ = true;
    op_.ctx->cancel(op_);
  }

 private:
  bool issue() noexcept;
  bool finish_piece() noexcept;
  static void on_piece(tern::detail::work_item* w);

  unsigned char* base_;
  std::size_t size_;
  std::uint64_t offset_;
  std::size_t done_ = 0;
  std::error_code ec_;
  file_state state_;
  bool canceled_ = false;
};

// fsync, fdatasync, fallocate, ftruncate, and the path calls: yields std::error_code.
class [[nodiscard]] file_call_awaiter : public file_op_awaiter {
 public:
  file_call_awaiter(io_context& ctx, descriptor* d, op_code code) noexcept : file_op_awaiter(ctx, d, code) {}
  bool await_ready() noexcept { return refused(op_.code != op_code::renameat && op_.code != op_code::unlinkat &&
                                               op_.code != op_code::mkdirat); }
  std::error_code await_resume() const noexcept { return op_.res < 0 ? error() : std::error_code{}; }
  file_op& op() noexcept { return op_; }
};

// rename, remove, create_directory: a file_call_awaiter with its paths copied.
class [[nodiscard]] path_call_awaiter : public file_call_awaiter {
 public:
  path_call_awaiter(io_context& ctx, op_code code, const char* path, const char* path2 = "")
      : file_call_awaiter(ctx, nullptr, code), path_(path), path2_(path2) {
    repoint();
  }
  path_call_awaiter(const path_call_awaiter& o) : file_call_awaiter(o), path_(o.path_), path2_(o.path2_) { repoint(); }

 private:
  void repoint() noexcept {
    op().path = path_.c_str();
    op().path2 = path2_.c_str();
  }
  path_copy path_;
  path_copy path2_;
};

// statx of an open file (path "") or of a path: yields io_result<file_status>.
class [[nodiscard]] stat_awaiter : public file_op_awaiter {
 public:
  stat_awaiter(io_context& ctx, descriptor* d, const char* path, bool follow_symlinks) noexcept;
  stat_awaiter(const stat_awaiter& o) noexcept : file_op_awaiter(o) { op_.buf = &result_; }
  bool await_ready() noexcept { return refused(op_.path[0] == '\0'); }
  io_result<file_status> await_resume() const noexcept;

 protected:
  void set_path(const char* path) noexcept { op_.path = path; }

 private:
  struct ::statx result_{};
};

// statx of a path, copied.
class [[nodiscard]] path_stat_awaiter : public stat_awaiter {
 public:
  path_stat_awaiter(io_context& ctx, const char* path, bool follow_symlinks)
      : stat_awaiter(ctx, nullptr, path, follow_symlinks), path_(path) {
    set_path(path_.c_str());
  }
  path_stat_awaiter(const path_stat_awaiter& o) : stat_awaiter(o), path_(o.path_) { set_path(path_.c_str()); }

 private:
  path_copy path_;
};

class open_awaiter;

}  // namespace detail

class file : public basic_descriptor {
 public:
  // A closed file on ctx; open() opens one.
  explicit file(io_context& ctx) noexcept : basic_descriptor(ctx) {}

  // Awaitable: opens path on ctx with opts; yields io_result<file>. Awaited by a task running on ctx.
  static detail::open_awaiter open(io_context& ctx, const char* path, open_options opts = {});
  static detail::open_awaiter open(io_context& ctx, const std::string& path, open_options opts = {});
  static detail::open_awaiter open(io_context& ctx, const std::filesystem::path& path, open_options opts = {});
  // Takes ownership of an open file descriptor (any kind the calls below apply to); a FIFO, a socket or a terminal
  // is set to the mode ctx's backend needs (non-blocking under epoll), as pipe_reader::adopt does.
  [[nodiscard]] static io_result<file> adopt(io_context& ctx, unique_fd fd) noexcept;

  // Awaitable: reads up to b.size() bytes at the file's own position, which advances (read(2)): for files read in
  // order, FIFOs and character devices (see above); yields io_result<size_t> (eof at the end). With it and
  // write_some, a file is a stream: buffered_reader and buffered_writer work over it.
  detail::file_io_awaiter read_some(mutable_buffer b) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b.data(), b.size(), detail::file_op::current_position, state_};
  }
  // Awaitable: writes up to b.size() bytes at the file's own position (at the end with open_options::append).
  detail::file_io_awaiter write_some(const_buffer b) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, const_cast<void*>(b.data()), b.size(),
            detail::file_op::current_position, state_};
  }
  // Awaitable: fills b from the file's own position, which advances; yields io_result<size_t>, the bytes read
  // before any error (eof if the file, or every writer of a FIFO, ends first).
  detail::file_transfer_awaiter read_exact(mutable_buffer b) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b.data(), b.size(), detail::file_op::current_position, state_};
  }
  // Awaitable: writes all of b at the file's own position (at the end with open_options::append), in as many calls
  // as it takes; yields io_result<size_t>, the bytes written before any error.
  detail::file_transfer_awaiter write_all(const_buffer b) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, const_cast<void*>(b.data()), b.size(),
            detail::file_op::current_position, state_};
  }
  // Awaitable: reads up to b.size() bytes at offset; yields io_result<size_t> (eof at or past the end).
  detail::file_io_awaiter read_at(mutable_buffer b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b.data(), b.size(), offset, state_};
  }
  // Awaitable: writes up to b.size() bytes at offset; yields io_result<size_t>.
  detail::file_io_awaiter write_at(const_buffer b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, const_cast<void*>(b.data()), b.size(), offset, state_};
  }
  // Awaitable: fills b from offset; yields io_result<size_t>, the bytes read before any error (eof if the file
  // ends first).
  detail::file_transfer_awaiter read_exact_at(mutable_buffer b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b.data(), b.size(), offset, state_};
  }
  // Awaitable: writes all of b at offset; yields io_result<size_t>, the bytes written before any error.
  detail::file_transfer_awaiter write_all_at(const_buffer b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, const_cast<void*>(b.data()), b.size(), offset, state_};
  }
  // The same four with a registered buffer (or a part of one) of this file's loop: READ_FIXED/WRITE_FIXED on
  // io_uring, the plain calls under epoll. A buffer of another loop's set completes with wrong_loop.
  detail::file_io_awaiter read_at(const registered_buffer& b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b, offset, state_};
  }
  detail::file_io_awaiter write_at(const registered_buffer& b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, b, offset, state_};
  }
  detail::file_transfer_awaiter read_exact_at(const registered_buffer& b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::read_at, b, offset, state_};
  }
  detail::file_transfer_awaiter write_all_at(const registered_buffer& b, std::uint64_t offset) noexcept {
    return {*ctx_, desc_, detail::op_code::write_at, b, offset, state_};
  }

  // Puts the file in its loop's table of registered files (io_uring); its reads, writes and syncs then use the
  // table slot. Idempotent; close() (and release(), move_to()) gives the slot back. Errors: table_full when every
  // slot is taken (the file goes on working unregistered), bad_file_descriptor when closed, wrong_loop from a thread
  // that does not run the loop while another does, the kernel's otherwise. Under epoll: does nothing, succeeds.
  // (basic_descriptor::register_descriptor under the name files have always had; is_registered() tells.)
  [[nodiscard]] std::error_code register_file() noexcept;

  // Awaitable: fsync (data and metadata reach the device); yields std::error_code.
  detail::file_call_awaiter sync() noexcept { return call(detail::op_code::fsync, 0); }
  // Awaitable: fdatasync (the data, and the metadata needed to read it back); yields std::error_code.
  detail::file_call_awaiter sync_data() noexcept { return call(detail::op_code::fsync, 1); }
  // Awaitable: fallocate(mode, offset, length): reserves space (mode 0), or punches holes and the like (the
  // FALLOC_FL_ flags); yields std::error_code (no_space_on_device when the disk is full).
  detail::file_call_awaiter allocate(std::uint64_t offset, std::uint64_t length, int mode = 0) noexcept {
    detail::file_call_awaiter a = call(detail::op_code::fallocate, mode);
    a.op().offset = offset;
    a.op().length = length;
    return a;
  }
  // Awaitable: ftruncate: sets the size (shrinking or growing with a hole); yields std::error_code.
  detail::file_call_awaiter truncate(std::uint64_t size) noexcept {
    detail::file_call_awaiter a = call(detail::op_code::ftruncate, 0);
    a.op().offset = size;
    return a;
  }
  // Awaitable: statx of the open file; yields io_result<file_status>.
  detail::stat_awaiter stat() noexcept { return {*ctx_, desc_, "", false}; }

  // Direct I/O: the alignment that buffer addresses (first) and offsets and sizes (second) must keep; {0, 0} when
  // the file was not opened for direct I/O.
  std::pair<std::uint32_t, std::uint32_t> direct_alignment() const noexcept {
    return {state_.memory_alignment, state_.offset_alignment};
  }

  // Internal: a file for a descriptor of ctx.
  file(io_context& ctx, tern::detail::descriptor* d, detail::file_state state) noexcept
      : basic_descriptor(ctx, d), state_(state) {}

 private:
  detail::file_call_awaiter call(detail::op_code code, int flags) noexcept {
    detail::file_call_awaiter a(*ctx_, desc_, code);
    a.op().flags = flags;
    return a;
  }

  detail::file_state state_;
};

namespace detail {
// open(): openat, then (for direct I/O) the file's alignment from statx; yields io_result<file>. Under epoll the
// call is made with O_NONBLOCK, as io_uring makes its first try, so that it never waits in the kernel for a FIFO's
// other end (a reader opens at once, a writer without a reader is ENXIO, on both backends); only an open that the
// kernel says would block on something else (EAGAIN: a lease being broken) is made again without it.
class [[nodiscard]] open_awaiter : public file_op_awaiter {
 public:
  open_awaiter(io_context& ctx, const char* path, open_options opts);
  open_awaiter(const open_awaiter& o)
      : file_op_awaiter(o), path_(o.path_), direct_(o.direct_), nonblocking_(o.nonblocking_) {
    op_.path = path_.c_str();
    op_.run = &on_opened;
    op_.owner = this;
  }
  bool await_ready() noexcept { return refused(false); }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    op_.handle = h;
    return !issue();
  }
  io_result<file> await_resume() noexcept;

 private:
  bool issue() noexcept;
  bool retry_blocking() noexcept;
  static void on_opened(tern::detail::work_item* w);

  path_copy path_;
  bool direct_;
  bool nonblocking_ = false;  // O_NONBLOCK added to the call (epoll), to be taken off the file once it is open
};
}  // namespace detail

// Awaitable: statx of a path; yields io_result<file_status> (of the link itself when follow_symlinks is false).
detail::path_stat_awaiter status(io_context& ctx, const char* path, bool follow_symlinks = true);
// Awaitable: renames from to to (replacing to); yields std::error_code.
detail::path_call_awaiter rename(io_context& ctx, const char* from, const char* to);
// Awaitable: removes a file (or an empty directory with directory true); yields std::error_code.
detail::path_call_awaiter remove(io_context& ctx, const char* path, bool directory = false);
// Awaitable: makes a directory; yields std::error_code (file_exists if it does).
detail::path_call_awaiter create_directory(io_context& ctx, const char* path, mode_t mode = 0755);

// Memory for direct I/O: size bytes (rounded up to alignment) at an address that is a multiple of alignment (a
// power of two; 4096 suits every file system), zero-filled. Converts to mutable_buffer and const_buffer.
class aligned_buffer {
 public:
  aligned_buffer() noexcept = default;
  explicit aligned_buffer(std::size_t size, std::size_t alignment = 4096);
  aligned_buffer(aligned_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  aligned_buffer& operator=(aligned_buffer&& o) noexcept;
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
  ~aligned_buffer();

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  operator mutable_buffer() noexcept { return {data_, size_}; }      // NOLINT: a buffer, like a container
  operator const_buffer() const noexcept { return {data_, size_}; }  // NOLINT

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tern::fs
