// The "tern" error category (see tern/error.hpp). Defined once, here, so that every translation unit and every
// shared object compares against the same category object.
#include "tern/error.hpp"

namespace tern::detail {

constinit const error_category_impl error_category_instance;
constinit const condition_category_impl condition_category_instance;

std::string error_category_impl::message(int value) const {
  switch (static_cast<error>(value)) {
    case error::operation_canceled: return "operation canceled";
    case error::timed_out: return "operation timed out";
    case error::wrong_loop:
      return "I/O object used from a thread that does not run its loop (usually a task that moved to another worker "
             "with runtime::switch_to while it still uses an object of its first one): await its operations in a "
             "task running on the io_context it was created on (switch back, or spawn the task there), or move it "
             "with release() and adopt()";
    case error::eof: return "end of stream: the peer closed the connection";
    case error::closed: return "the channel is closed";
    case error::full: return "the channel is full";
    case error::line_too_long: return "no delimiter within the buffered reader's limit: the line is too long";
    case error::operation_in_progress: return "an operation is pending on the object";
    case error::message_truncated: return "message truncated: the datagram or its descriptors did not fit";
    case error::stale_socket_file:
      return "a socket file nobody listens on is in the way (bind with remove_stale to replace it)";
    case error::misaligned:
      return "direct I/O needs the buffer address, the offset and the size aligned to the file's direct-I/O "
             "alignment (fs::file::direct_alignment, fs::aligned_buffer)";
    case error::table_full:
      return "the loop's table of registered files or buffers is full (io_context_options::registered_file_slots, "
             "registered_buffer_slots); the file or memory still works unregistered";
  }
  return "unknown tern error";
}

std::error_condition error_category_impl::default_error_condition(int value) const noexcept {
  switch (static_cast<error>(value)) {
    case error::operation_canceled: return std::errc::operation_canceled;
    case error::timed_out: return std::errc::timed_out;
    case error::full: return std::errc::resource_unavailable_try_again;
    case error::line_too_long: return std::errc::message_size;
    case error::operation_in_progress: return std::errc::operation_in_progress;
    case error::message_truncated: return std::errc::message_size;
    case error::stale_socket_file: return std::errc::address_in_use;
    case error::misaligned: return std::errc::invalid_argument;
    case error::wrong_loop:
    case error::table_full:
    case error::eof:
    case error::closed: break;
  }
  return {value, *this};
}

std::string condition_category_impl::message(int value) const {
  switch (static_cast<condition>(value)) {
    case condition::end_of_stream: return "end of stream: the peer ended the stream";
  }
  return "unknown tern condition";
}

bool condition_category_impl::equivalent(const std::error_code& code, int value) const noexcept {
  switch (static_cast<condition>(value)) {
    case condition::end_of_stream: return code == error::eof;
  }
  return false;
}

}  // namespace tern::detail
