// The nghttp2 calls tern::http2 makes, under one name whatever the library's version (internal). nghttp2 1.60
// replaced the calls that pass sizes as ssize_t by *2 calls with nghttp2_ssize and deprecated the old ones; Debian
// 12 has 1.52, which has only the old ones. tern drives nghttp2 through its memory interface only (mem_recv,
// mem_send): no send or recv callback is ever set.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace tern::http2::detail {

#if NGHTTP2_VERSION_NUM >= 0x013c00
using ng_ssize = nghttp2_ssize;
using ng_data_provider = nghttp2_data_provider2;

inline ng_ssize mem_recv(nghttp2_session* s, const std::uint8_t* in, std::size_t n) noexcept {
  return nghttp2_session_mem_recv2(s, in, n);
}
inline ng_ssize mem_send(nghttp2_session* s, const std::uint8_t** out) noexcept {
  return nghttp2_session_mem_send2(s, out);
}
inline int submit_response(nghttp2_session* s, std::int32_t id, const nghttp2_nv* nva, std::size_t n,
                           const ng_data_provider* body) noexcept {
  return nghttp2_submit_response2(s, id, nva, n, body);
}
inline std::int32_t submit_request(nghttp2_session* s, const nghttp2_nv* nva, std::size_t n,
                                   const ng_data_provider* body, void* stream_data) noexcept {
  return nghttp2_submit_request2(s, nullptr, nva, n, body, stream_data);
}
inline int submit_data(nghttp2_session* s, std::uint8_t flags, std::int32_t id, const ng_data_provider* body) noexcept {
  return nghttp2_submit_data2(s, flags, id, body);
}
#else
using ng_ssize = ssize_t;
using ng_data_provider = nghttp2_data_provider;

inline ng_ssize mem_recv(nghttp2_session* s, const std::uint8_t* in, std::size_t n) noexcept {
  return nghttp2_session_mem_recv(s, in, n);
}
inline ng_ssize mem_send(nghttp2_session* s, const std::uint8_t** out) noexcept {
  return nghttp2_session_mem_send(s, out);
}
inline int submit_response(nghttp2_session* s, std::int32_t id, const nghttp2_nv* nva, std::size_t n,
                           const ng_data_provider* body) noexcept {
  return nghttp2_submit_response(s, id, nva, n, body);
}
inline std::int32_t submit_request(nghttp2_session* s, const nghttp2_nv* nva, std::size_t n,
                                   const ng_data_provider* body, void* stream_data) noexcept {
  return nghttp2_submit_request(s, nullptr, nva, n, body, stream_data);
}
inline int submit_data(nghttp2_session* s, std::uint8_t flags, std::int32_t id, const ng_data_provider* body) noexcept {
  return nghttp2_submit_data(s, flags, id, body);
}
#endif

// A body's read callback, in the form of this version's data provider.
using read_callback = ng_ssize (*)(nghttp2_session*, std::int32_t, std::uint8_t*, std::size_t, std::uint32_t*,
                                   nghttp2_data_source*, void*);

inline ng_data_provider data_provider(void* source, read_callback cb) noexcept {
  ng_data_provider p{};
  p.source.ptr = source;
  p.read_callback = cb;
  return p;
}

struct session_deleter {
  void operator()(nghttp2_session* s) const noexcept { nghttp2_session_del(s); }
};
using session_ptr = std::unique_ptr<nghttp2_session, session_deleter>;

struct callbacks_deleter {
  void operator()(nghttp2_session_callbacks* c) const noexcept { nghttp2_session_callbacks_del(c); }
};
using callbacks_ptr = std::unique_ptr<nghttp2_session_callbacks, callbacks_deleter>;

struct option_deleter {
  void operator()(nghttp2_option* o) const noexcept { nghttp2_option_del(o); }
};
using option_ptr = std::unique_ptr<nghttp2_option, option_deleter>;

// An empty callback table; the caller sets its callbacks. Throws std::bad_alloc when nghttp2 cannot make one.
inline callbacks_ptr new_callbacks() {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) throw std::bad_alloc();
  return callbacks_ptr(cb);
}

// Opens the connection's receive window (65535 bytes by the protocol) to window, if that is larger: one
// WINDOW_UPDATE on stream 0 with the session's first frames. A window is at most 2^31 - 1 (RFC 9113, 6.9.1).
inline void widen_connection_window(nghttp2_session* s, std::uint32_t window) noexcept {
  constexpr std::uint32_t largest = NGHTTP2_MAX_WINDOW_SIZE;
  if (window > largest) window = largest;
  if (window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE) {
    (void)nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, static_cast<std::int32_t>(window));
  }
}

// A field for nghttp2 (which copies it when submitted: the views need to live only through the submit call),
// written into e member by member: an assignment of a made nghttp2_nv also copies the padding after flags, through
// the stack (four instructions per field of a response head).
inline void set_nv(nghttp2_nv& e, const char* name, std::size_t name_size, const char* value, std::size_t value_size,
                   std::uint8_t flags = NGHTTP2_NV_FLAG_NONE) noexcept {
  e.name = reinterpret_cast<std::uint8_t*>(const_cast<char*>(name));
  e.value = reinterpret_cast<std::uint8_t*>(const_cast<char*>(value));
  e.namelen = name_size;
  e.valuelen = value_size;
  e.flags = flags;
}
// The same as a value, for the arrays that are built by push_back.
inline nghttp2_nv make_nv(const char* name, std::size_t name_size, const char* value, std::size_t value_size,
                         std::uint8_t flags = NGHTTP2_NV_FLAG_NONE) noexcept {
  nghttp2_nv e{};
  set_nv(e, name, name_size, value, value_size, flags);
  return e;
}

// A name that is a lowercase string literal: nghttp2 neither copies nor lowercases it (a copy and a pass over the
// name per field of every response).
template <std::size_t N>
inline nghttp2_nv make_static_nv(const char (&name)[N], const char* value, std::size_t value_size) noexcept {
  return make_nv(name, N - 1, value, value_size, NGHTTP2_NV_FLAG_NO_COPY_NAME);
}
template <std::size_t N>
inline void set_static_nv(nghttp2_nv& e, const char (&name)[N], const char* value, std::size_t value_size) noexcept {
  set_nv(e, name, N - 1, value, value_size, NGHTTP2_NV_FLAG_NO_COPY_NAME);
}

}  // namespace tern::http2::detail
