// tern/redis/request.hpp
//
// How commands become RESP: each is an array of bulk strings (`*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n`), written
// straight into a buffer that keeps its capacity, so that a connection formats its commands without allocating.
// And redis::pipeline and redis::transaction: several commands sent together, their replies kept in order.
//
// A command's arguments are any mix of:
// - text: anything that converts to std::string_view (string literals, std::string, string_view), sent as is;
// - numbers: integers (not bool or characters) and floating point, in decimal (shortest round-trip form);
// - ranges of these (std::vector<std::string>, std::span<const int>, ...), one argument per element, and of
//   std::pair of these (a std::map of fields and values for HSET), two per element.
//
//   redis::pipeline p;
//   p.push("SET", "greeting", "hello");
//   p.push("INCR", "visits");
//   p.push("MGET", std::vector<std::string>{"greeting", "visits"});
//   if (auto r = co_await conn.execute(p); r.ec) ...        // the connection's error, or a transaction's
//   auto [ec, n] = p.reply(1).to<std::int64_t>();           // each reply converted on its own
//
// A pipeline's commands leave in one write, contiguous on the connection (no other task's command between them);
// a transaction wraps them in MULTI and EXEC, so the server runs them at once, and its replies are EXEC's (a
// command refused when queued makes execute() fail with exec_abort and its text; EXEC's null, after a WATCHed key
// changed, with transaction_aborted). A pipeline can be executed again: clear() it and push new commands, or
// execute the same ones; its buffer and replies keep their capacity.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ranges>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/redis/reply.hpp"

namespace tern::redis {

namespace detail {

// A byte buffer that grows and keeps its capacity (no zero-filling on growth).
class output_buffer {
 public:
  output_buffer() = default;
  output_buffer(output_buffer&& o) noexcept
      : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
  output_buffer& operator=(output_buffer&& o) noexcept {
    data_ = std::move(o.data_);
    size_ = std::exchange(o.size_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    return *this;
  }

  const char* data() const noexcept { return data_.get(); }
  char* data() noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  void clear() noexcept { size_ = 0; }

  // Room for n more bytes; returns where they go (commit them with commit(n)).
  char* prepare(std::size_t n) {
    if (capacity_ - size_ < n) grow(n);
    return data_.get() + size_;
  }
  void commit(std::size_t n) noexcept { size_ += n; }
  void append(const char* p, std::size_t n) {
    if (n == 0) return;
    std::memcpy(prepare(n), p, n);
    size_ += n;
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  // Removes n bytes at pos.
  void erase(std::size_t pos, std::size_t n) noexcept {
    if (n == 0) return;
    std::memmove(data_.get() + pos, data_.get() + pos + n, size_ - pos - n);
    size_ -= n;
  }
  // Frees the storage if it is empty and holds more than limit bytes (after a large value went through).
  void release_if_over(std::size_t limit) noexcept {
    if (size_ == 0 && capacity_ > limit) {
      data_.reset();
      capacity_ = 0;
    }
  }
  void swap(output_buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

 private:
  void grow(std::size_t n) {
    std::size_t cap = capacity_ < 4096 ? 4096 : capacity_ * 2;
    while (cap - size_ < n) cap *= 2;
    auto fresh = std::make_unique_for_overwrite<char[]>(cap);
    if (size_ != 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = cap;
  }

  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

template <class T>
concept text_argument = std::convertible_to<const T&, std::string_view>;
template <class T>
concept number_argument =
    (integer_value<T> || std::floating_point<T>);
template <class T>
concept scalar_argument = text_argument<T> || number_argument<T>;

template <class T>
struct is_pair : std::false_type {};
template <class A, class B>
struct is_pair<std::pair<A, B>> : std::true_type {};

template <class T>
concept element_argument = scalar_argument<T> || (is_pair<T>::value && scalar_argument<typename T::first_type> &&
                                                  scalar_argument<typename T::second_type>);
template <class T>
concept range_argument = !text_argument<T> && std::ranges::sized_range<const T> &&
                         element_argument<std::remove_cvref_t<std::ranges::range_reference_t<const T>>>;

// One argument of a command, as the compiler sees it.
template <class T>
concept argument = scalar_argument<T> || range_argument<T>;

// The number of bulk strings an argument makes.
template <class T>
std::size_t argument_count(const T& a) noexcept {
  if constexpr (scalar_argument<T>) {
    return 1;
  } else {
    using E = std::remove_cvref_t<std::ranges::range_reference_t<const T>>;
    return std::ranges::size(a) * (is_pair<E>::value ? 2 : 1);
  }
}

// A command is written in one pass into room reserved for it at once: each argument's bound (its text, or a
// number's longest form, and its header) is added up first, so that the bytes go out without a capacity check each.
constexpr std::size_t header_bound = 25;  // "$" or "*", up to 20 digits, CR LF (and a bulk string's closing CR LF)
constexpr std::size_t number_bound = 40;  // the longest decimal form of an integer or a double

// n in decimal at p; returns the end. The short lengths of most arguments skip to_chars.
[[gnu::always_inline]] inline char* put_decimal(char* p, std::size_t n) noexcept {
  if (n < 10) {
    *p = static_cast<char>('0' + n);
    return p + 1;
  }
  if (n < 100) {
    p[0] = static_cast<char>('0' + n / 10);
    p[1] = static_cast<char>('0' + n % 10);
    return p + 2;
  }
  return std::to_chars(p, p + 20, n).ptr;
}

// "<prefix><n>\r\n"
[[gnu::always_inline]] inline char* put_length(char* p, char prefix, std::size_t n) noexcept {
  *p++ = prefix;
  p = put_decimal(p, n);
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

// n bytes from s to d. Arguments are mostly short (a command's name, a key, a small value): up to 32 bytes they
// are copied by two fixed-size moves that overlap as needed, with no call to memcpy, which costs more than the copy.
[[gnu::always_inline]] inline void copy_bytes(char* d, const char* s, std::size_t n) noexcept {
  auto both_ends = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    char head[K];
    char tail[K];
    std::memcpy(head, s, K);
    std::memcpy(tail, s + n - K, K);
    std::memcpy(d, head, K);
    std::memcpy(d + n - K, tail, K);
  };
  if (n > 32) {
    std::memcpy(d, s, n);
  } else if (n >= 16) {
    both_ends(std::integral_constant<std::size_t, 16>{});
  } else if (n >= 8) {
    both_ends(std::integral_constant<std::size_t, 8>{});
  } else if (n >= 4) {
    both_ends(std::integral_constant<std::size_t, 4>{});
  } else if (n != 0) {
    d[0] = s[0];
    d[n / 2] = s[n / 2];
    d[n - 1] = s[n - 1];
  }
}

// The text of a text argument. A character array (a literal: "SET") is measured by a loop bounded by its size,
// which the compiler keeps inline, where string_view's constructor would call strlen.
template <class T>
[[gnu::always_inline]] inline std::string_view text_of(const T& a) noexcept {
  if constexpr (std::is_array_v<T>) {
    std::size_t n = 0;
    while (n < std::extent_v<T> && a[n] != '\0') ++n;
    return {a, n};
  } else {
    return std::string_view(a);
  }
}

[[gnu::always_inline]] inline char* put_bulk(char* p, std::string_view s) noexcept {
  p = put_length(p, '$', s.size());
  copy_bytes(p, s.data(), s.size());
  p += s.size();
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

template <class T>
std::size_t scalar_bound(const T& a) noexcept {
  if constexpr (text_argument<T>) {
    return text_of(a).size() + header_bound;
  } else {
    return number_bound + header_bound;
  }
}

template <class T>
[[gnu::always_inline]] inline char* put_scalar(char* p, const T& a) noexcept {
  if constexpr (text_argument<T>) {
    return put_bulk(p, text_of(a));
  } else {
    char digits[number_bound];
    const auto r = std::to_chars(digits, digits + sizeof digits, a);
    return put_bulk(p, std::string_view(digits, static_cast<std::size_t>(r.ptr - digits)));
  }
}

// The most bytes an argument takes.
template <class T>
std::size_t argument_bound(const T& a) noexcept {
  if constexpr (scalar_argument<T>) {
    return scalar_bound(a);
  } else {
    std::size_t n = 0;
    for (const auto& e : a) {
      if constexpr (is_pair<std::remove_cvref_t<decltype(e)>>::value) {
        n += scalar_bound(e.first) + scalar_bound(e.second);
      } else {
        n += scalar_bound(e);
      }
    }
    return n;
  }
}

template <class T>
[[gnu::always_inline]] inline char* put_argument(char* p, const T& a) noexcept {
  if constexpr (scalar_argument<T>) {
    return put_scalar(p, a);
  } else {
    for (const auto& e : a) {
      if constexpr (is_pair<std::remove_cvref_t<decltype(e)>>::value) {
        p = put_scalar(p, e.first);
        p = put_scalar(p, e.second);
      } else {
        p = put_scalar(p, e);
      }
    }
    return p;
  }
}

// The whole command: the array header, then each argument.
template <class... Args>
void write_command(output_buffer& out, const Args&... args) {
  char* const start = out.prepare(header_bound + (std::size_t{0} + ... + argument_bound(args)));
  char* p = put_length(start, '*', (std::size_t{0} + ... + argument_count(args)));
  ((p = put_argument(p, args)), ...);
  out.commit(static_cast<std::size_t>(p - start));
}

// Commands a shared, pipelined connection cannot carry, because they change what the replies that follow mean:
// the pub/sub family and MONITOR (the connection's own subscribe() and friends do pub/sub), HELLO and RESET
// (the protocol and the connection's state are the connection's). In a single command(), also MULTI, EXEC and
// DISCARD: another task's command could land inside the transaction; a pipeline or transaction carries them.
// CLIENT REPLY (OFF and SKIP leave replies out, so the replies that follow would reach the wrong requests).
enum class reserved_kind { none, always, outside_pipeline };
reserved_kind reserved(std::string_view command_name, std::string_view subcommand = {}) noexcept;

// The command's name: its first argument, if that is text.
template <class First, class... Rest>
std::string_view command_name(const First& first, const Rest&...) noexcept {
  if constexpr (text_argument<First>) {
    return text_of(first);
  } else {
    return {};
  }
}

// The subcommand: the second argument, if there is one and it is text.
template <class First, class... Rest>
std::string_view subcommand_name(const First&, const Rest&... rest) noexcept {
  if constexpr (sizeof...(Rest) == 0) {
    return {};
  } else {
    return command_name(rest...);
  }
}

struct pipeline_access;

}  // namespace detail

class pipeline {
 public:
  pipeline() = default;
  pipeline(pipeline&&) noexcept = default;
  pipeline& operator=(pipeline&&) noexcept = default;

  // Adds a command (its arguments are formatted now; they need not outlive the call).
  template <detail::argument... Args>
    requires(sizeof...(Args) > 0)
  pipeline& push(const Args&... args) {
    if (detail::reserved(detail::command_name(args...), detail::subcommand_name(args...)) ==
        detail::reserved_kind::always) {
      reserved_ = true;
    }
    detail::write_command(buffer_, args...);
    ++commands_;
    return *this;
  }
  // The commands added.
  std::size_t size() const noexcept { return commands_; }
  bool empty() const noexcept { return commands_ == 0; }
  // Removes the commands and the replies, keeping their storage.
  void clear() noexcept {
    buffer_.clear();
    commands_ = 0;
    reserved_ = false;
    for (redis::reply& r : replies_) r.clear();
  }
  // A pipeline whose commands may be sent again after a connection failed before their replies (see
  // connection::command's idempotent); false by default.
  void set_idempotent(bool on) noexcept { idempotent_ = on; }
  bool idempotent() const noexcept { return idempotent_; }
  // True for a transaction.
  bool is_transaction() const noexcept { return transaction_; }

  // After execute(): the reply to command i (for a transaction, its element of EXEC's reply).
  const redis::reply& reply(std::size_t i) const noexcept { return replies_[i]; }

 protected:
  explicit pipeline(bool transaction) noexcept : transaction_(transaction) {}

 private:
  friend struct detail::pipeline_access;
  detail::output_buffer buffer_;
  std::size_t commands_ = 0;
  std::vector<redis::reply> replies_;
  bool idempotent_ = false;
  bool transaction_ = false;
  bool reserved_ = false;
};

// A pipeline sent as MULTI, its commands, EXEC: run by the server at once.
class transaction : public pipeline {
 public:
  transaction() noexcept : pipeline(true) {}
};

}  // namespace tern::redis
