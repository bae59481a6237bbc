// http::fields and field_list: case-insensitive lookups, order, duplicates, replacement, and the owning form's
// storage: inline for a few fields, spilled to the heap beyond, kept whole by copies and moves, safe when a field
// is set from a view of the same object.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tern/http/fields.hpp"

namespace {

namespace http = tern::http;

std::vector<std::string> lines(const http::fields& f) {
  std::vector<std::string> out;
  for (http::field x : f) out.push_back(std::string(x.name) + ": " + std::string(x.value));
  return out;
}

TEST(http_fields, lookups_order_and_duplicates) {
  http::fields f;
  f.add("Content-Type", "text/plain");
  f.add("Set-Cookie", "a=1");
  f.add("set-cookie", "b=2");
  EXPECT_EQ(f.get("CONTENT-TYPE"), "text/plain");
  EXPECT_EQ(f.count("Set-Cookie"), 2u);
  EXPECT_EQ(f.get("set-cookie"), "a=1") << "the first of several";
  EXPECT_FALSE(f.contains("content-length"));
  EXPECT_EQ(f.get("content-length"), "");
  f.set("SET-COOKIE", "c=3");
  EXPECT_EQ(lines(f), (std::vector<std::string>{"Content-Type: text/plain", "SET-COOKIE: c=3"}));
  f.set("content-type", "json");  // shorter: replaced in place, keeping its place and its name
  EXPECT_EQ(lines(f), (std::vector<std::string>{"Content-Type: json", "SET-COOKIE: c=3"}));
  EXPECT_EQ(f.erase("set-cookie"), 1u);
  EXPECT_EQ(f.erase("nothing"), 0u);
  EXPECT_EQ(lines(f), (std::vector<std::string>{"Content-Type: json"}));
  f.clear();
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(http::list_contains("keep-alive, Upgrade ,x", "upgrade"));
  EXPECT_FALSE(http::list_contains("keep-alive, upgraded", "upgrade"));
}

TEST(http_fields, spill_copy_move_and_aliasing) {
  http::fields f;
  std::vector<std::string> expected;
  for (int i = 0; i < 40; ++i) {  // past the inline entries and bytes
    const std::string name = "X-Field-" + std::to_string(i);
    const std::string value(i * 3, static_cast<char>('a' + i % 26));
    f.add(name, value);
    expected.push_back(name + ": " + value);
  }
  EXPECT_EQ(lines(f), expected);
  http::fields copy = f;
  EXPECT_EQ(lines(copy), expected);
  http::fields moved = std::move(copy);
  EXPECT_EQ(lines(moved), expected);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from fields is empty
  http::fields small;
  small.add("A", "1");
  http::fields small_moved = std::move(small);
  EXPECT_EQ(lines(small_moved), (std::vector<std::string>{"A: 1"}));
  moved = small_moved;
  EXPECT_EQ(lines(moved), (std::vector<std::string>{"A: 1"}));
  // A value taken from the object itself, while the object grows under it.
  for (int i = 0; i < 30; ++i) moved.add("B" + std::to_string(i), moved.get("A"));
  EXPECT_EQ(moved.get("B29"), "1");
  moved.set("A", moved.get("B3"));
  EXPECT_EQ(moved.get("A"), "1");
}

}  // namespace
