// body_reader and response_stream: the streaming form of a route, over whichever exchange serves the request (an
// HTTP/1.1 connection, server.cpp; an HTTP/2 stream, tern::http2).
#include "tern/http/stream.hpp"

#include <algorithm>

#include "tern/error.hpp"
#include "tern/http/error.hpp"

namespace tern::http {

task<io_result<std::size_t>> body_reader::read_some(mutable_buffer b) { return conn_->read_body_some(b); }

task<std::error_code> body_reader::read_all(std::string& out, std::size_t max) {
  for (;;) {
    const std::size_t start = out.size();
    const std::size_t room = std::max<std::size_t>(4096, start);
    out.resize(start + room);
    auto [ec, n] = co_await conn_->read_body_some(mutable_buffer(out.data() + start, room));
    out.resize(start + n);
    if (ec == tern::error::eof) co_return std::error_code{};
    if (ec) co_return ec;
    if (out.size() > max) co_return make_error_code(error::body_too_large);
  }
}

bool body_reader::done() const noexcept { return conn_->body_done(); }

std::optional<std::uint64_t> body_reader::length() const noexcept { return conn_->body_length(); }

const field_list& body_reader::trailers() const noexcept { return conn_->body_trailers(); }

task<std::error_code> response_stream::start(int status, const fields& f, std::optional<std::uint64_t> length) {
  return conn_->send_head(*this, status, f, length);
}

task<std::error_code> response_stream::write(const_buffer b) { return conn_->send_body(*this, b); }

task<std::error_code> response_stream::write_last(const_buffer b) { return conn_->send_last(*this, b); }

task<std::error_code> response_stream::finish() { return conn_->send_end(*this, nullptr); }

task<std::error_code> response_stream::finish(const fields& trailers) { return conn_->send_end(*this, &trailers); }

namespace detail {

// A declared length that b would not reach exactly is refused before anything goes out, so that a refused
// write_last leaves the response as it was (the checks of send_body and send_end alone would send b, then refuse).
task<std::error_code> exchange::send_last(response_stream& s, const_buffer b) {
  if (s.started_ && !s.finished_ && s.length_ && s.written_ + b.size() != *s.length_) {
    co_return std::make_error_code(std::errc::invalid_argument);
  }
  if (std::error_code ec = co_await send_body(s, b)) co_return ec;
  co_return co_await send_end(s, nullptr);
}

}  // namespace detail

}  // namespace tern::http
