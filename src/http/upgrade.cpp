// upgraded_stream: a connection taken over from HTTP after a 101 (see tern/http/upgrade.hpp).
#include "tern/http/upgrade.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tern::http {

upgraded_stream::upgraded_stream(net::tcp_socket socket, std::unique_ptr<transport> secure, std::string buffered)
    : socket_(std::move(socket)), secure_(std::move(secure)), buffered_(std::move(buffered)) {}

upgraded_stream::upgraded_stream(std::unique_ptr<transport> tunnel)
    : socket_(tunnel->socket().context()), secure_(std::move(tunnel)) {}

upgraded_stream::upgraded_stream(upgraded_stream&&) noexcept = default;
upgraded_stream& upgraded_stream::operator=(upgraded_stream&&) noexcept = default;
upgraded_stream::~upgraded_stream() = default;

net::tcp_socket& upgraded_stream::socket() noexcept { return secure_ ? secure_->socket() : socket_; }

void upgraded_stream::close() noexcept {
  if (secure_) secure_->close();
  else socket_.close();
}

task<io_result<std::size_t>> upgraded_stream::read_some(mutable_buffer b) {
  if (taken_ < buffered_.size()) {
    const std::size_t n = std::min(b.size(), buffered_.size() - taken_);
    std::memcpy(b.data(), buffered_.data() + taken_, n);
    taken_ += n;
    if (taken_ == buffered_.size()) {
      buffered_ = std::string();  // the memory goes with its last byte
      taken_ = 0;
    }
    co_return io_result<std::size_t>{std::error_code{}, n};
  }
  if (secure_) co_return co_await secure_->read_some(b);
  co_return co_await socket_.read_some(b);
}

task<io_result<std::size_t>> upgraded_stream::write_some(const_buffer b) {
  if (secure_) co_return co_await secure_->write_all(b);
  co_return co_await socket_.write_some(b);
}

task<io_result<std::size_t>> upgraded_stream::write_all(const_buffer b) {
  if (secure_) co_return co_await secure_->write_all(b);
  co_return co_await socket_.write_all(b);
}

task<std::error_code> upgraded_stream::shutdown_send() {
  if (secure_) co_return co_await secure_->shutdown_send();
  co_return socket_.shutdown(net::shutdown_how::send);
}

}  // namespace tern::http
