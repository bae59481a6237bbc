// tern/redis/reply.hpp
//
// What a command yields: redis::result<T>, an error code and a value like every tern result, plus the server's
// error text; and the conversions from RESP3 replies to C++ types.
//
//   auto [ec, value] = co_await conn.command<std::string>("GET", "key");   // result<std::string>
//   if (ec == redis::error::null_value) ...                                // no such key
//   auto r = co_await conn.command<std::optional<std::string>>("GET", "key");
//   if (redis::is_server_error(r.ec)) std::puts(r.message.c_str());        // "WRONGTYPE Operation against ..."
//
// The conversions (T of command<T>, reply::to<T>):
// - std::string: simple, blob and verbatim strings (a verbatim string's text without its format), and the text of
//   integers, doubles and big numbers;
// - integers (any integral type but bool and the character types): integers, and strings holding a decimal
//   integer (GET of a counter), checked against the type's range (not_a_number otherwise);
// - double: doubles, integers, and strings holding a number; bool: booleans, and integers 0 and 1;
// - std::optional<U>: null is nullopt, anything else a U;
// - std::vector<U>: the elements of an array, set or push (a map's keys and values, alternating);
// - std::map<K, V>, std::unordered_map<K, V>: a map, or an array of keys and values (RESP2's HGETALL);
//   std::set<U>, std::unordered_set<U>: the elements of a set or an array;
// - redis::reply: any reply, kept whole (every node, attributes included) for later conversion;
// - redis::ignore_t: anything but an error.
// A reply of another type is error::unexpected_type, a null where the type has none error::null_value, an error
// reply (anywhere in the value) its server error with its text in message. Attributes are skipped by every
// conversion but reply's. A conversion writes into the value as the reply's nodes arrive, so a string result is
// filled straight from the connection's input buffer (command_into() reuses the caller's string and its capacity).
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tern/redis/error.hpp"
#include "tern/redis/resp.hpp"

namespace tern::redis {

// The result of a command: ec is empty on success (value is then the reply, converted); for a server error it is
// its code (is_server_error(ec)) and message is the server's text. `auto [ec, value] = ...` binds ec and value.
template <class T>
struct result {
  std::error_code ec;
  T value{};
  std::string message;  // the server's error text, when ec is a server error

  template <std::size_t I>
  auto& get() & noexcept {
    if constexpr (I == 0) return ec; else return value;
  }
  template <std::size_t I>
  const auto& get() const& noexcept {
    if constexpr (I == 0) return ec; else return value;
  }
  template <std::size_t I>
  auto&& get() && noexcept {
    if constexpr (I == 0) return std::move(ec); else return std::move(value);
  }
};

// The result of a request without a value (command_into, execute, subscribe): the error code and the server's
// error text.
template <>
struct result<void> {
  std::error_code ec;
  std::string message;
  explicit operator bool() const noexcept { return !ec; }
};

// Converts to nothing: accepts any reply but an error.
struct ignore_t {};
inline constexpr ignore_t ignore{};

class reply;

namespace detail {

// Where a conversion reports its first error; later nodes of the reply are then not looked at.
struct conversion_error {
  std::error_code ec = no_error;
  std::string message;
  bool failed() const noexcept { return static_cast<bool>(ec); }
  // Forgets an error (a request formatted again). Tested first: assigning a fresh error_code and string costs a
  // call and a string move on every command, where there is almost never anything to forget.
  void clear() noexcept {
    if (ec) ec.clear();
    if (!message.empty()) message.clear();
  }
  void set(error e) {
    if (!ec) ec = make_error_code(e);
  }
  void server(std::string_view text) {
    if (ec) return;
    ec = make_error_code(server_error_code(text));
    message.assign(text);
  }
};

// A node that ends a conversion at once: an error reply, or the wrong kind for a scalar.
inline bool take_error(const resp::node& n, conversion_error& err) {
  if (!resp::is_error(n.type)) return false;
  err.server(n.value);
  return true;
}

template <class T>
struct adapter;

template <class T>
concept integer_value = std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char> &&
                        !std::same_as<T, signed char> && !std::same_as<T, unsigned char> &&
                        !std::same_as<T, char8_t> && !std::same_as<T, char16_t> && !std::same_as<T, char32_t> &&
                        !std::same_as<T, wchar_t>;

// Copies text into out. The value never aliases out (it is a view of the connection's input), so the copy needs
// neither assign()'s overlap test nor, while it fits, a reallocation: clear() and append() reuse the capacity.
inline void assign_text(std::string& out, std::string_view text) {
  out.clear();
  out.append(text.data(), text.size());
}

// Every adapter: start(out) before a value's first node; feed(out, node, err) for each of its nodes (never an
// attribute's), true when the value is complete. After an error, the caller stops feeding.
template <>
struct adapter<std::string> {
  void start(std::string&) noexcept {}
  bool feed(std::string& out, const resp::node& n, conversion_error& err) {
    if (take_error(n, err)) return true;
    switch (n.type) {
      case resp::type::simple_string:
      case resp::type::blob_string:
      case resp::type::verbatim_string:
      case resp::type::integer:
      case resp::type::double_type:
      case resp::type::big_number: assign_text(out, n.value); break;
      case resp::type::null: err.set(error::null_value); break;
      default: err.set(error::unexpected_type); break;
    }
    return true;
  }
};

template <integer_value T>
struct adapter<T> {
  void start(T&) noexcept {}
  bool feed(T& out, const resp::node& n, conversion_error& err) {
    if (take_error(n, err)) return true;
    switch (n.type) {
      case resp::type::integer:
        if (!std::in_range<T>(n.integer)) {
          err.set(error::not_a_number);
        } else {
          out = static_cast<T>(n.integer);
        }
        break;
      case resp::type::simple_string:
      case resp::type::blob_string:
      case resp::type::big_number: {
        const char* end = n.value.data() + n.value.size();
        const auto [p, ec] = std::from_chars(n.value.data(), end, out);
        if (ec != std::errc() || p != end || n.value.empty()) err.set(error::not_a_number);
        break;
      }
      case resp::type::null: err.set(error::null_value); break;
      default: err.set(error::unexpected_type); break;
    }
    return true;
  }
};

template <>
struct adapter<double> {
  void start(double&) noexcept {}
  bool feed(double& out, const resp::node& n, conversion_error& err) {
    if (take_error(n, err)) return true;
    switch (n.type) {
      case resp::type::double_type: out = n.number; break;
      case resp::type::integer: out = static_cast<double>(n.integer); break;
      case resp::type::simple_string:
      case resp::type::blob_string: {
        std::string_view s = n.value;
        if (!s.empty() && s[0] == '+') s.remove_prefix(1);
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, out);
        if (ec != std::errc() || p != end || s.empty()) err.set(error::not_a_number);
        break;
      }
      case resp::type::null: err.set(error::null_value); break;
      default: err.set(error::unexpected_type); break;
    }
    return true;
  }
};

template <>
struct adapter<bool> {
  void start(bool&) noexcept {}
  bool feed(bool& out, const resp::node& n, conversion_error& err) {
    if (take_error(n, err)) return true;
    if (n.type == resp::type::boolean || (n.type == resp::type::integer && (n.integer == 0 || n.integer == 1))) {
      out = n.integer != 0;
    } else if (n.type == resp::type::null) {
      err.set(error::null_value);
    } else {
      err.set(error::unexpected_type);
    }
    return true;
  }
};

template <>
struct adapter<ignore_t> {
  std::uint64_t left = 0;  // values still to skip
  bool started = false;
  void start(ignore_t&) noexcept {
    left = 0;
    started = false;
  }
  bool feed(ignore_t&, const resp::node& n, conversion_error& err) {
    if (!started) {
      started = true;
      if (take_error(n, err)) return true;
      left = 1;
    }
    --left;
    if (resp::is_aggregate(n.type)) left += n.type == resp::type::map ? n.size * 2 : n.size;
    return left == 0;
  }
};

template <class U>
struct adapter<std::optional<U>> {
  adapter<U> inner;
  bool started = false;
  void start(std::optional<U>&) noexcept { started = false; }
  bool feed(std::optional<U>& out, const resp::node& n, conversion_error& err) {
    if (!started) {
      started = true;
      if (n.type == resp::type::null) {
        out.reset();
        return true;
      }
      if (!out) out.emplace();
      inner.start(*out);
    }
    return inner.feed(*out, n, err);
  }
};

// The start of an aggregate converted to a container: its element count (a map's keys and values), or done.
inline bool open_aggregate(const resp::node& n, conversion_error& err, std::uint64_t& left) {
  if (take_error(n, err)) return false;
  if (n.type == resp::type::null) {
    err.set(error::null_value);
    return false;
  }
  if (!resp::is_aggregate(n.type)) {
    err.set(error::unexpected_type);
    return false;
  }
  left = n.type == resp::type::map ? n.size * 2 : n.size;
  return true;
}

// Containers that take their elements one at a time: std::vector (push_back), the sets (insert).
template <class C, class U>
struct sequence_adapter {
  adapter<U> element;
  U current{};
  std::uint64_t left = 0;
  bool started = false;
  bool in_element = false;
  void start(C&) noexcept {
    started = false;
    in_element = false;
  }
  bool feed(C& out, const resp::node& n, conversion_error& err) {
    if (!started) {
      started = true;
      if (!open_aggregate(n, err, left)) return true;
      out.clear();
      return left == 0;
    }
    if (!in_element) {
      in_element = true;
      element.start(current);
    }
    if (!element.feed(current, n, err)) return false;
    in_element = false;
    if constexpr (requires { out.push_back(std::move(current)); }) {
      out.push_back(std::move(current));
    } else {
      out.insert(std::move(current));
    }
    current = U{};
    return --left == 0;
  }
};

template <class U, class A>
struct adapter<std::vector<U, A>> : sequence_adapter<std::vector<U, A>, U> {};
template <class U, class C, class A>
struct adapter<std::set<U, C, A>> : sequence_adapter<std::set<U, C, A>, U> {};
template <class U, class H, class E, class A>
struct adapter<std::unordered_set<U, H, E, A>> : sequence_adapter<std::unordered_set<U, H, E, A>, U> {};

template <class M, class K, class V>
struct map_adapter {
  adapter<K> key_adapter;
  adapter<V> value_adapter;
  K key{};
  V value{};
  std::uint64_t left = 0;
  bool started = false;
  bool in_element = false;
  bool on_value = false;
  void start(M&) noexcept {
    started = false;
    in_element = false;
    on_value = false;
  }
  bool feed(M& out, const resp::node& n, conversion_error& err) {
    if (!started) {
      started = true;
      if (!open_aggregate(n, err, left)) return true;
      if (left % 2 != 0) {
        err.set(error::unexpected_type);
        return true;
      }
      out.clear();
      return left == 0;
    }
    if (!in_element) {
      in_element = true;
      if (on_value) {
        value_adapter.start(value);
      } else {
        key_adapter.start(key);
      }
    }
    const bool done = on_value ? value_adapter.feed(value, n, err) : key_adapter.feed(key, n, err);
    if (!done) return false;
    in_element = false;
    if (on_value) {
      out.insert_or_assign(std::move(key), std::move(value));
      key = K{};
      value = V{};
    }
    on_value = !on_value;
    return --left == 0;
  }
};

template <class K, class V, class C, class A>
struct adapter<std::map<K, V, C, A>> : map_adapter<std::map<K, V, C, A>, K, V> {};
template <class K, class V, class H, class E, class A>
struct adapter<std::unordered_map<K, V, H, E, A>> : map_adapter<std::unordered_map<K, V, H, E, A>, K, V> {};

// Feeds a whole reply's nodes (attributes skipped) to the adapter of T.
template <class T>
class converter {
 public:
  void start(T& out) {
    err_.clear();
    done_ = false;
    adapter_.start(out);
  }
  void feed(T& out, const resp::node& n) {
    if (done_ || err_.failed() || n.in_attribute) return;
    done_ = adapter_.feed(out, n, err_);
  }
  conversion_error& error() noexcept { return err_; }

 private:
  adapter<T> adapter_;
  conversion_error err_;
  bool done_ = false;
};

}  // namespace detail

// A reply kept whole: its nodes in pre-order (attributes included), their text in storage of its own. Reused, it
// keeps its capacity.
class reply {
 public:
  // The nodes, in the parser's order; node(i)'s views point into this reply (valid until it changes).
  std::size_t size() const noexcept { return nodes_.size(); }
  bool empty() const noexcept { return nodes_.empty(); }
  resp::node node(std::size_t i) const noexcept {
    const entry& e = nodes_[i];
    resp::node n;
    n.type = e.type;
    n.depth = e.depth;
    n.in_attribute = e.in_attribute;
    n.size = e.size;
    n.value = std::string_view(text_).substr(e.offset, e.length);
    n.format = std::string_view(e.format, e.type == resp::type::verbatim_string ? 3 : 0);
    n.integer = e.integer;
    n.number = e.number;
    return n;
  }
  // The reply's own value: its first node outside an attribute.
  resp::node root() const noexcept {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].in_attribute) return node(i);
    }
    return {};
  }
  resp::type type() const noexcept { return root().type; }
  // An error reply (at the top): its text is root().value.
  bool is_error() const noexcept { return resp::is_error(root().type); }
  bool is_null() const noexcept { return root().type == resp::type::null; }

  // The reply converted to T (see the list above).
  template <class T>
  result<T> to() const {
    result<T> r;
    detail::converter<T> c;
    c.start(r.value);
    for (std::size_t i = 0; i < nodes_.size(); ++i) c.feed(r.value, node(i));
    r.ec = c.error().ec;
    r.message = std::move(c.error().message);
    return r;
  }

  // Empties the reply, keeping its capacity.
  void clear() noexcept {
    nodes_.clear();
    text_.clear();
  }
  // Appends a node (its text copied).
  void add(const resp::node& n) {
    entry e;
    e.type = n.type;
    e.depth = n.depth;
    e.in_attribute = n.in_attribute;
    e.size = n.size;
    e.offset = text_.size();
    e.length = n.value.size();
    e.integer = n.integer;
    e.number = n.number;
    for (std::size_t i = 0; i < 3 && i < n.format.size(); ++i) e.format[i] = n.format[i];
    text_.append(n.value);
    nodes_.push_back(e);
  }

 private:
  struct entry {
    resp::type type;
    bool in_attribute;
    char format[3] = {};
    std::uint32_t depth;
    std::uint64_t size;
    std::size_t offset;
    std::size_t length;
    std::int64_t integer;
    double number;
  };
  std::vector<entry> nodes_;
  std::string text_;
};

namespace detail {
// A reply kept whole: every node, attributes included; an error reply is reported as the result's error too.
template <>
struct adapter<reply> {
  bool started = false;
  void start(reply& out) noexcept {
    started = false;
    out.clear();
  }
  bool feed(reply& out, const resp::node& n, conversion_error& err) {
    if (!started && !n.in_attribute) {
      started = true;
      if (resp::is_error(n.type)) err.server(n.value);
    }
    out.add(n);
    return false;  // the reply's end is the connection's to see: every node, to the last, is kept
  }
};

// reply takes attributes too: its converter feeds it every node.
template <>
class converter<reply> {
 public:
  void start(reply& out) {
    err_.clear();
    adapter_.start(out);
  }
  void feed(reply& out, const resp::node& n) { adapter_.feed(out, n, err_); }
  conversion_error& error() noexcept { return err_; }

 private:
  adapter<reply> adapter_;
  conversion_error err_;
};
}  // namespace detail

}  // namespace tern::redis

template <class T>
struct std::tuple_size<tern::redis::result<T>> : std::integral_constant<std::size_t, 2> {};
template <class T>
struct std::tuple_element<0, tern::redis::result<T>> {
  using type = std::error_code;
};
template <class T>
struct std::tuple_element<1, tern::redis::result<T>> {
  using type = T;
};
