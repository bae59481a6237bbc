// tern::mutable_buffer / tern::const_buffer: conversions from the usual byte containers and offsetting.
#include <tern/buffer.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

static_assert(!std::is_constructible_v<tern::mutable_buffer, const std::string&>,
              "a read must not be able to target const memory");
static_assert(!std::is_constructible_v<tern::mutable_buffer, std::vector<int>&>, "only byte-sized elements");
static_assert(!std::is_constructible_v<tern::const_buffer, std::vector<int>&>, "only byte-sized elements");

TEST(buffer, mutable_from_containers) {
  std::string s = "hello";
  tern::mutable_buffer a = s;
  EXPECT_EQ(a.data(), s.data());
  EXPECT_EQ(a.size(), 5u);

  std::vector<char> v(7);
  tern::mutable_buffer b = v;
  EXPECT_EQ(b.data(), v.data());
  EXPECT_EQ(b.size(), 7u);

  std::array<std::byte, 16> arr{};
  tern::mutable_buffer c = arr;
  EXPECT_EQ(c.data(), arr.data());
  EXPECT_EQ(c.size(), 16u);

  std::vector<unsigned char> u(3);
  tern::mutable_buffer d = std::span<unsigned char>(u);
  EXPECT_EQ(d.data(), u.data());
  EXPECT_EQ(d.size(), 3u);

  char raw[9];
  tern::mutable_buffer e(raw, sizeof(raw));
  EXPECT_EQ(e.data(), raw);
  EXPECT_EQ(e.size(), 9u);
}

// Passing a std::string where a const_buffer is expected (sock.write_all(str)) is an implicit conversion.
TEST(buffer, implicit_conversions) {
  EXPECT_TRUE((std::is_convertible_v<std::string&, tern::mutable_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::vector<char>&, tern::mutable_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::array<std::byte, 4>&, tern::mutable_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::span<unsigned char>, tern::mutable_buffer>));
  EXPECT_TRUE((std::is_convertible_v<const std::string&, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::string&, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::string_view, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<const char*, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<const std::vector<char>&, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::vector<std::byte>&, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<std::span<const char>, tern::const_buffer>));
  EXPECT_TRUE((std::is_convertible_v<tern::mutable_buffer, tern::const_buffer>));
}

TEST(buffer, const_from_containers_and_text) {
  const std::string s = "constant";
  tern::const_buffer a(s);
  EXPECT_EQ(a.data(), s.data());
  EXPECT_EQ(a.size(), 8u);

  std::string_view sv = "view";
  tern::const_buffer b = sv;
  EXPECT_EQ(b.data(), sv.data());
  EXPECT_EQ(b.size(), 4u);

  tern::const_buffer c = "literal";
  EXPECT_EQ(c.size(), 7u) << "a string literal converts without its terminating NUL";

  const std::vector<std::byte> v(11);
  tern::const_buffer d = v;
  EXPECT_EQ(d.data(), v.data());
  EXPECT_EQ(d.size(), 11u);

  std::vector<char> m(4);
  tern::const_buffer e = tern::mutable_buffer(m);
  EXPECT_EQ(e.data(), m.data());
  EXPECT_EQ(e.size(), 4u);
}

TEST(buffer, offset_clamps_to_size) {
  char raw[10];
  tern::mutable_buffer b(raw, sizeof(raw));
  tern::mutable_buffer tail = b + 4;
  EXPECT_EQ(tail.data(), raw + 4);
  EXPECT_EQ(tail.size(), 6u);
  tern::mutable_buffer past = b + 25;
  EXPECT_EQ(past.size(), 0u);
  EXPECT_EQ(past.data(), raw + 10);

  tern::const_buffer c(raw, sizeof(raw));
  EXPECT_EQ((c + 10).size(), 0u);
  EXPECT_EQ((c + 3).data(), raw + 3);
  EXPECT_EQ((c + 3).size(), 7u);
}

TEST(buffer, default_is_empty) {
  EXPECT_EQ(tern::mutable_buffer().size(), 0u);
  EXPECT_EQ(tern::const_buffer().size(), 0u);
  EXPECT_EQ(tern::mutable_buffer().data(), nullptr);
}

}  // namespace
