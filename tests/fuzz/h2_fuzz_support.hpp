// What the HTTP/2 fuzz targets (http2_server.cpp, http2_client.cpp) share: an in-memory transport that hands the
// input over in pieces the input's hash chooses, and the following of the frames the side under test writes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "tern/http/transport.hpp"
#include "tern/sync/event.hpp"
#include "tern/tern.hpp"

namespace tern::fuzz {

// The frames of one side's output, followed header by header across writes: on_frame(type) is called as each
// frame's header is whole; every frame's length is checked against the largest a peer may allow.
class frame_follower {
 public:
  template <class OnFrame>
  void feed(std::string_view bytes, OnFrame&& on_frame) {
    while (!bytes.empty()) {
      if (skip_ != 0) {
        const std::size_t k = std::min(skip_, bytes.size());
        skip_ -= k;
        bytes.remove_prefix(k);
        continue;
      }
      partial_.push_back(bytes.front());
      bytes.remove_prefix(1);
      if (partial_.size() < 9) continue;
      const auto* h = reinterpret_cast<const unsigned char*>(partial_.data());
      skip_ = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
      TERN_FUZZ_CHECK(skip_ <= 16777215);
      on_frame(static_cast<unsigned>(h[3]));
      partial_.clear();
    }
  }
  // No frame is cut short.
  bool whole() const noexcept { return partial_.empty() && skip_ == 0; }

 private:
  std::string partial_;  // the current frame's header, until it is whole
  std::size_t skip_ = 0;
};

// The peer's side of a connection: what the side under test reads is the input, in pieces of 1 to 64 bytes mostly
// and now and then larger (every frame boundary falls anywhere), once gate (if any) is set; what it writes goes
// to on_write. Owns nothing it refers to.
template <class OnWrite>
class memory_transport final : public http::transport {
 public:
  memory_transport(io_context& ctx, std::string_view input, choices& cuts, OnWrite on_write,
                   sync::manual_reset_event* gate = nullptr)
      : socket_(ctx), input_(input), cuts_(cuts), on_write_(on_write), gate_(gate) {}

  task<std::error_code> handshake() override { co_return std::error_code{}; }
  task<io_result<std::size_t>> read_some(mutable_buffer b) override {
    if (gate_ != nullptr) {
      if (std::error_code ec = co_await gate_->wait()) co_return io_result<std::size_t>{ec, 0};
    }
    if (input_.empty()) co_return io_result<std::size_t>{make_error_code(error::eof), 0};
    const std::size_t piece = cuts_.one_in(4) ? cuts_.between(1, 4096) : cuts_.between(1, 64);
    const std::size_t n = std::min({piece, input_.size(), b.size()});
    std::memcpy(b.data(), input_.data(), n);
    input_.remove_prefix(n);
    co_return io_result<std::size_t>{std::error_code{}, n};
  }
  task<io_result<std::size_t>> write_all(const_buffer b) override {
    on_write_(std::string_view(static_cast<const char*>(b.data()), b.size()));
    co_return io_result<std::size_t>{std::error_code{}, b.size()};
  }
  task<std::error_code> shutdown_send() override { co_return std::error_code{}; }
  net::tcp_socket& socket() noexcept override { return socket_; }

 private:
  net::tcp_socket socket_;
  std::string_view input_;
  choices& cuts_;
  OnWrite on_write_;
  sync::manual_reset_event* gate_;
};

}  // namespace tern::fuzz
