// The RESP3 parser (tern/redis/resp.hpp) on its own: every type, the same nodes however the bytes are split, reply
// boundaries and attributes, the limits, and malformed input refused. And the other direction: how a command's
// arguments are formatted (tern/redis/request.hpp).
#include "support.hpp"

#include <tern/redis/request.hpp>
#include <tern/redis/resp.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace {

namespace resp = tern::redis::resp;
using tern::redis::error;

// What a parse reported: one line per node ("depth type value [size]"), "|" at each reply boundary, and the error.
struct transcript {
  std::vector<std::string> lines;
  std::error_code ec;
  std::size_t left = 0;  // bytes not consumed at the end
};

std::string show(const resp::node& n) {
  std::string s = std::to_string(n.depth) + " " + resp::to_string(n.type);
  if (n.in_attribute) s += " (attr)";
  if (resp::is_aggregate(n.type)) return s + " " + std::to_string(n.size);
  s += " '" + std::string(n.value) + "'";
  if (!n.format.empty()) s += " format=" + std::string(n.format);
  if (n.type == resp::type::integer || n.type == resp::type::boolean) s += " =" + std::to_string(n.integer);
  if (n.type == resp::type::double_type) s += " =" + std::to_string(n.number);
  return s;
}

// Parses input given `step` bytes more at a time (0: all at once), as a connection's buffer would hold them.
transcript parse(std::string_view input, std::size_t step = 0, const resp::limits& limits = {}) {
  transcript t;
  resp::parser p(limits);
  std::string buffer;
  std::size_t given = 0;
  for (;;) {
    const resp::parser::result r = p.next(buffer);
    if (r.what == resp::parser::status::node) {
      EXPECT_GT(r.consumed, 0u);
      EXPECT_LE(r.consumed, buffer.size());
      t.lines.push_back(show(r.n));
      buffer.erase(0, r.consumed);
      if (p.at_reply_boundary()) t.lines.push_back("|");
      continue;
    }
    if (r.what == resp::parser::status::failed) {
      t.ec = r.ec;
      break;
    }
    EXPECT_EQ(r.consumed, 0u);
    if (r.need != 0) {
      EXPECT_GT(r.need, buffer.size());
    }
    if (given == input.size()) break;
    const std::size_t n = step == 0 ? input.size() - given : std::min(step, input.size() - given);
    buffer.append(input.substr(given, n));
    given += n;
  }
  t.left = buffer.size();
  return t;
}

const std::string every_type =
    "+OK\r\n"
    "-ERR unknown command\r\n"
    ":-42\r\n"
    ",3.25\r\n"
    ",inf\r\n"
    "(3492890328409238509324850943850943825024385\r\n"
    "#t\r\n"
    "#f\r\n"
    "_\r\n"
    "$5\r\nhe\r\nl\r\n"
    "$0\r\n\r\n"
    "!21\r\nSYNTAX invalid syntax\r\n"
    "=15\r\ntxt:Some string\r\n"
    "*3\r\n:1\r\n*1\r\n+in\r\n$1\r\nx\r\n"
    "%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n"
    "~2\r\n+a\r\n+b\r\n"
    ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
    "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.1923\r\n*2\r\n:2039123\r\n:9543892\r\n"
    "*0\r\n"
    "$-1\r\n"
    "*-1\r\n";

const std::vector<std::string> every_type_nodes = {
    "0 simple_string 'OK'", "|",
    "0 simple_error 'ERR unknown command'", "|",
    "0 integer '-42' =-42", "|",
    "0 double '3.25' =3.250000", "|",
    "0 double 'inf' =inf", "|",
    "0 big_number '3492890328409238509324850943850943825024385'", "|",
    "0 boolean 't' =1", "|",
    "0 boolean 'f' =0", "|",
    "0 null ''", "|",
    "0 blob_string 'he\r\nl'", "|",
    "0 blob_string ''", "|",
    "0 blob_error 'SYNTAX invalid syntax'", "|",
    "0 verbatim_string 'Some string' format=txt", "|",
    "0 array 3", "1 integer '1' =1", "1 array 1", "2 simple_string 'in'", "1 blob_string 'x'", "|",
    "0 map 2", "1 simple_string 'first'", "1 integer '1' =1", "1 simple_string 'second'", "1 integer '2' =2", "|",
    "0 set 2", "1 simple_string 'a'", "1 simple_string 'b'", "|",
    "0 push 3", "1 blob_string 'message'", "1 blob_string 'news'", "1 blob_string 'hi'", "|",
    "0 attribute (attr) 1", "1 simple_string (attr) 'key-popularity'", "1 map (attr) 1",
    "2 blob_string (attr) 'a'", "2 double (attr) '0.1923' =0.192300", "0 array 2", "1 integer '2039123' =2039123",
    "1 integer '9543892' =9543892", "|",
    "0 array 0", "|",
    "0 null ''", "|",
    "0 null ''", "|",
};

TEST(resp_parser, every_type_becomes_a_node) {
  const transcript t = parse(every_type);
  EXPECT_FALSE(t.ec) << t.ec.message();
  EXPECT_EQ(t.left, 0u);
  EXPECT_EQ(t.lines, every_type_nodes);
}

TEST(resp_parser, the_same_nodes_whatever_the_split) {
  for (std::size_t step : {1, 2, 3, 5, 7, 13, 64}) {
    const transcript t = parse(every_type, step);
    EXPECT_FALSE(t.ec) << "step " << step;
    EXPECT_EQ(t.lines, every_type_nodes) << "step " << step;
  }
}

TEST(resp_parser, need_says_how_much_a_bulk_string_takes) {
  resp::parser p;
  const std::string head = "$100000\r\n";
  const resp::parser::result r = p.next(head + "abc");
  EXPECT_EQ(r.what, resp::parser::status::need_more);
  EXPECT_EQ(r.need, head.size() + 100000 + 2);
}

TEST(resp_parser, an_incomplete_node_consumes_nothing) {
  for (std::string_view part : {"+O", "+OK\r", ":12", "$5\r\nhel", "$5\r\nhello\r", "*2\r"}) {
    resp::parser p;
    const resp::parser::result r = p.next(part);
    EXPECT_EQ(r.what, resp::parser::status::need_more) << part;
    EXPECT_EQ(r.consumed, 0u) << part;
  }
}

TEST(resp_parser, a_reply_ends_when_its_last_element_does) {
  resp::parser p;
  std::string in = "*2\r\n*1\r\n:1\r\n:2\r\n";
  std::vector<bool> boundaries;
  while (!in.empty()) {
    const resp::parser::result r = p.next(in);
    ASSERT_EQ(r.what, resp::parser::status::node);
    in.erase(0, r.consumed);
    boundaries.push_back(p.at_reply_boundary());
  }
  EXPECT_EQ(boundaries, (std::vector<bool>{false, false, false, true}));
}

TEST(resp_parser, an_empty_attribute_still_precedes_its_value) {
  const transcript t = parse("+OK\r\n|0\r\n:1\r\n");
  EXPECT_FALSE(t.ec);
  EXPECT_EQ(t.lines, (std::vector<std::string>{"0 simple_string 'OK'", "|", "0 attribute (attr) 0", "0 integer '1' =1",
                                               "|"}));
}

TEST(resp_parser, limits_are_refused_before_the_bytes_arrive) {
  resp::limits l;
  l.max_bulk = 10;
  EXPECT_EQ(parse("$11\r\n", 0, l).ec, error::bulk_too_large);
  EXPECT_FALSE(parse("$10\r\n0123456789\r\n", 0, l).ec);
  l = {};
  l.max_depth = 3;
  EXPECT_EQ(parse("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", 0, l).ec, error::nesting_too_deep);
  EXPECT_FALSE(parse("*1\r\n*1\r\n*1\r\n:1\r\n", 0, l).ec);
  l = {};
  l.max_elements = 4;
  EXPECT_EQ(parse("*5\r\n", 0, l).ec, error::aggregate_too_large);
  EXPECT_EQ(parse("%5\r\n", 0, l).ec, error::aggregate_too_large);
  l = {};
  l.max_line = 8;
  EXPECT_EQ(parse("+0123456789", 0, l).ec, error::line_too_long);
  EXPECT_EQ(parse("+0123456789", 1, l).ec, error::line_too_long);
  EXPECT_FALSE(parse("+01234567\r\n", 0, l).ec);
  // The error codes also say what kind of trouble it is.
  EXPECT_EQ(parse("$11\r\n", 0, resp::limits{.max_bulk = 10}).ec, std::errc::message_size);
}

TEST(resp_parser, malformed_input_is_refused_and_the_parser_stays_failed) {
  const std::string_view bad[] = {
      ":12a\r\n", ":\r\n", ":99999999999999999999\r\n", ",1.5x\r\n", ",\r\n", "#x\r\n", "_x\r\n", "(12a\r\n",
      "$5\r\nhelloXY", "$-2\r\n", "$?\r\n", "*?\r\n", "*-2\r\n", "%-1\r\n", "=3\r\nabc\r\n", "=5\r\ntxt;a\r\n",
      "?\r\n", "+a\nb\r\n", "+ab\rc\r\n", "\n", "$+5\r\nhello\r\n", "+a\nb--\r", "$3\n4\r"};
  for (std::string_view b : bad) {
    const transcript t = parse(b);
    EXPECT_EQ(t.ec, error::protocol_error) << b;
    EXPECT_EQ(parse(b, 1).ec, t.ec) << b << " a byte at a time";
  }
  resp::parser p;
  EXPECT_EQ(p.next(":x\r\n").what, resp::parser::status::failed);
  EXPECT_EQ(p.next("+OK\r\n").what, resp::parser::status::failed);
  p.reset();
  EXPECT_EQ(p.next("+OK\r\n").what, resp::parser::status::node);
}

TEST(resp_parser, integers_cover_the_whole_range) {
  const transcript t = parse(":9223372036854775807\r\n:-9223372036854775808\r\n:+7\r\n");
  EXPECT_FALSE(t.ec);
  EXPECT_EQ(t.lines, (std::vector<std::string>{"0 integer '9223372036854775807' =9223372036854775807", "|",
                                               "0 integer '-9223372036854775808' =-9223372036854775808", "|",
                                               "0 integer '+7' =7", "|"}));
  EXPECT_EQ(parse(":9223372036854775808\r\n").ec, error::protocol_error);
  // 18 digits and fewer take a path without the overflow test; 19 and more the checked one.
  const transcript edge = parse(":999999999999999999\r\n:-999999999999999999\r\n:1000000000000000000\r\n");
  EXPECT_FALSE(edge.ec);
  EXPECT_EQ(edge.lines, (std::vector<std::string>{"0 integer '999999999999999999' =999999999999999999", "|",
                                                  "0 integer '-999999999999999999' =-999999999999999999", "|",
                                                  "0 integer '1000000000000000000' =1000000000000000000", "|"}));
  EXPECT_EQ(parse(":12345678901234567x\r\n").ec, error::protocol_error);
  EXPECT_EQ(parse("$1x\r\nab\r\n").ec, error::protocol_error);
}

// The bulk string a text argument becomes.
std::string bulk(std::string_view s) { return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n"; }

std::string formatted(const tern::redis::detail::output_buffer& out) { return std::string(out.data(), out.size()); }

TEST(request_format, every_argument_length_is_copied_whole) {
  // Short arguments are copied without memcpy, in overlapping pieces whose sizes depend on the length: each
  // length up to past the largest piece, with bytes that differ at every position.
  for (std::size_t k = 0; k <= 70; ++k) {
    for (std::size_t v = 0; v <= 70; v += (v < 40 ? 1 : 7)) {
      std::string key(k, ' ');
      std::string value(v, ' ');
      for (std::size_t i = 0; i < k; ++i) key[i] = static_cast<char>('a' + i % 26);
      for (std::size_t i = 0; i < v; ++i) value[i] = static_cast<char>('A' + (i * 7) % 26);
      tern::redis::detail::output_buffer out;
      tern::redis::detail::write_command(out, "SET", key, std::string_view(value));
      ASSERT_EQ(formatted(out), "*3\r\n" + bulk("SET") + bulk(key) + bulk(value)) << k << " " << v;
    }
  }
}

TEST(request_format, a_character_array_ends_at_its_nul_or_its_size) {
  const char unterminated[3] = {'G', 'E', 'T'};  // no NUL: its three characters, nothing past them
  const char padded[8] = "DEL";                    // a NUL before its end: the text before it
  tern::redis::detail::output_buffer out;
  tern::redis::detail::write_command(out, unterminated, padded, "");
  EXPECT_EQ(formatted(out), "*3\r\n" + bulk("GET") + bulk("DEL") + bulk(""));
}

}  // namespace
