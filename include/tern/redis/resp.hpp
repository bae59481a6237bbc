// tern/redis/resp.hpp
//
// The RESP3 protocol's reply side: the types of its values, and resp::parser, which takes a stream of reply bytes
// apart into nodes. tern::redis's connection reads every reply with it; it is public for tests and for programs
// that speak RESP over something else.
//
// A reply is a tree; the parser hands it out as its nodes in pre-order, one per next() call, each with its depth
// (0 for the top), so that a consumer builds what it wants (a string, a vector, a map: see reply.hpp) without an
// intermediate tree. It is incremental: next() is given the bytes not consumed yet, returns need_more (consuming
// nothing) until a whole node is there, and remembers where it stands inside the tree across calls, so a reply may
// arrive in any pieces; the nodes it returns are the same however the bytes were split (the fuzz target checks
// it). It is zero-copy: a node's text is a view into the bytes given, valid until they are moved or dropped. A
// consumer needs to keep only the current node's bytes, never a whole reply: a bulk string must be whole before its
// node is returned (need_more says how many bytes that takes), an aggregate's elements may be consumed one by one.
//
// Every type of RESP3 is a node type: simple string, simple error, blob string, blob error, verbatim string (its
// text without the "txt:" format, which is kept apart), integer, double, big number, boolean, null, and the
// aggregates array, map, set, push and attribute. RESP2's null bulk string ($-1) and null array (*-1) are nulls.
// An attribute (out-of-band data before a value) is handed out like an aggregate, its nodes marked in_attribute;
// it does not count as an element of its parent. RESP3's streamed strings and aggregates ($?, *?), which Redis never
// sends, are refused.
//
// Strict by default, with limits (resp::limits): a bulk length over max_bulk, aggregates nested deeper than
// max_depth, an aggregate of more than max_elements, or a line (type byte to CRLF) longer than max_line is refused
// before any of it is buffered; so is anything malformed (a bare CR or LF, a number out of range or with junk, a
// missing CRLF after a bulk string, an unknown type byte). After an error the parser stays failed: the stream
// cannot be resynchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>
#include <vector>

#include "tern/redis/error.hpp"

namespace tern::redis::resp {

enum class type : std::uint8_t {
  simple_string,    // +OK
  simple_error,     // -ERR unknown command
  blob_string,      // $5 hello
  blob_error,       // !21 SYNTAX invalid syntax
  verbatim_string,  // =15 txt:Some string
  integer,          // :1000
  double_type,      // ,3.14
  big_number,       // (3492890328409238509324850943850943825024385
  boolean,          // #t
  null,             // _ (and RESP2's $-1 and *-1)
  array,            // *3
  map,              // %2: key, value, key, value
  set,              // ~3
  push,             // >3: out-of-band data (pub/sub messages)
  attribute,        // |1: key, value, then the value they annotate
};

// "simple_string", "array", ...
const char* to_string(type t) noexcept;
// array, map, set, push, attribute.
constexpr bool is_aggregate(type t) noexcept { return t >= type::array; }
// simple_error and blob_error.
constexpr bool is_error(type t) noexcept { return t == type::simple_error || t == type::blob_error; }

// One value of a reply: a scalar, or the header of an aggregate whose elements follow it.
struct node {
  resp::type type = resp::type::null;
  std::uint32_t depth = 0;   // 0: the reply itself; an aggregate's elements are one deeper
  bool in_attribute = false;  // an attribute, or part of one
  // Aggregates: the number of elements (a map's and an attribute's: of pairs). Strings: the length of value.
  std::uint64_t size = 0;
  // The text of strings, errors, numbers and booleans ("t" or "f"); a view into the parser's input. A verbatim
  // string's is the text after its format.
  std::string_view value;
  std::string_view format;  // a verbatim string's format ("txt", "mkd")
  std::int64_t integer = 0;  // integer: its value; boolean: 1 or 0
  double number = 0;         // double: its value
};

struct limits {
  std::uint64_t max_bulk = std::uint64_t{512} << 20;  // longest blob or verbatim string (Redis' own default)
  std::uint32_t max_depth = 32;                       // deepest nesting of aggregates (at most 1024)
  std::uint64_t max_elements = std::uint64_t{1} << 24;  // most elements of one aggregate
  std::size_t max_line = 64 * 1024;                   // longest simple string, error or number line
};

class parser {
 public:
  enum class status : std::uint8_t {
    node,       // n is the next node; consumed bytes were used
    need_more,  // no whole node yet; nothing consumed; need is the bytes that will make one, when known
    failed,     // ec says why; the parser stays failed
  };
  struct result {
    status what = status::need_more;
    std::size_t consumed = 0;
    std::size_t need = 0;  // need_more: bytes (from the input's start) the next node takes, or 0 if not known
    std::error_code ec = redis::detail::no_error;
    resp::node n;
  };

  explicit parser(const limits& l = {});

  // The next node from data (the bytes not consumed yet).
  result next(const char* data, std::size_t size);
  result next(std::string_view data) { return next(data.data(), data.size()); }

  // True when the last node returned ended a reply (a whole top-level value), and before the first.
  bool at_reply_boundary() const noexcept { return depth_ == 0 && !pending_attribute_; }
  // The depth of the next node.
  std::uint32_t depth() const noexcept { return depth_; }
  // Forgets the reply in progress and any failure (a new connection).
  void reset() noexcept;
  const resp::limits& limits() const noexcept { return limits_; }

 private:
  struct level {
    std::uint64_t left;  // values still to come
    bool attribute;
  };
  result fail(error e) noexcept;
  result scalar(resp::type t, std::size_t consumed, std::string_view text) noexcept;
  result aggregate(resp::type t, std::size_t consumed, std::uint64_t count) noexcept;
  void value_done() noexcept;

  resp::limits limits_;
  std::vector<level> stack_;
  std::uint32_t depth_ = 0;
  std::uint32_t attribute_levels_ = 0;
  bool pending_attribute_ = false;  // an attribute ended at the top: its value has not come yet
  std::error_code failed_;
};

}  // namespace tern::redis::resp
