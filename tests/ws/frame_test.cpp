// tern::ws without I/O: SHA-1 against FIPS 180's vectors, base64, the RFC's Sec-WebSocket-Accept example, UTF-8
// validation against a straightforward reference (every split of the input), frame headers both ways, the frame
// decoder's refusals and its independence from how the input is split, permessage-deflate offers, and deflate and
// inflate between themselves.
#include <tern/ws/detail/core.hpp>
#include <tern/ws/detail/deflate.hpp>
#include <tern/ws/detail/frame.hpp>
#include <tern/ws/detail/handshake.hpp>
#include <tern/ws/error.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

namespace d = tern::ws::detail;
namespace ws = tern::ws;

std::string hex(const std::array<unsigned char, 20>& digest) {
  std::string out;
  char b[3];
  for (unsigned char c : digest) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

std::string sha1_hex(const std::string& s) { return hex(d::sha1(s.data(), s.size())); }

TEST(ws_sha1, fips_180_vectors) {
  EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(sha1_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                     "mnopqrstnopqrstu"),
            "a49b2446a02c645bf419f995b67091253a04a259");
  EXPECT_EQ(sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // Lengths around the padding's boundaries, against sha1sum's results.
  EXPECT_EQ(sha1_hex(std::string(55, 'x')), "cef734ba81a024479e09eb5a75b6ddae62e6abf1");
  EXPECT_EQ(sha1_hex(std::string(56, 'x')), "901305367c259952f4e7af8323f480d59f81335b");
  EXPECT_EQ(sha1_hex(std::string(63, 'x')), "0ddc4e0cccd9a12850deb5abb0853a4425559fec");
  EXPECT_EQ(sha1_hex(std::string(64, 'x')), "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163");
  EXPECT_EQ(sha1_hex(std::string(119, 'x')), "4300320394f7ee239bcdce7d3b8bcee173a0cd5c");
  EXPECT_EQ(sha1_hex(std::string(120, 'x')), "ceb2821639c4b6dcb10bce0e522ca2e608ce056d");
}

TEST(ws_handshake, accept_value_of_the_rfc_example) {
  // RFC 6455 §1.3.
  const auto v = d::accept_value("dGhlIHNhbXBsZSBub25jZQ==");
  EXPECT_EQ(std::string(v.data(), v.size()), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(ws_handshake, base64_both_ways) {
  const std::string samples[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const std::string expected[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    char out[16];
    const std::size_t n =
        d::base64_encode(reinterpret_cast<const unsigned char*>(samples[i].data()), samples[i].size(), out);
    EXPECT_EQ(std::string(out, n), expected[i]);
    unsigned char back[16];
    const long m = d::base64_decode(expected[i], back, sizeof back);
    ASSERT_EQ(m, static_cast<long>(samples[i].size()));
    EXPECT_EQ(std::string(reinterpret_cast<char*>(back), m), samples[i]);
  }
  unsigned char out[32];
  EXPECT_EQ(d::base64_decode("Zm9", out, sizeof out), -1);       // not a multiple of 4
  EXPECT_EQ(d::base64_decode("Zm=v", out, sizeof out), -1);      // data after padding
  EXPECT_EQ(d::base64_decode("Zm9v!A==", out, sizeof out), -1);  // not the alphabet
  EXPECT_EQ(d::base64_decode("Zm9vYmFy", out, 5), -1);           // does not fit
}

// UTF-8 as RFC 3629 defines it, decoded the plain way.
bool reference_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // cut short
    for (std::size_t k = 1; k <= n; ++k) {
      const unsigned char t = s[i + k];
      if ((t & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3f);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return false;  // overlong
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

// The validator fed in two pieces split at every position agrees with the reference.
void expect_utf8(const std::string& s) {
  const bool expected = reference_utf8(s);
  for (std::size_t split = 0; split <= s.size(); ++split) {
    d::utf8_validator v;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const bool ok = v.feed(p, split) && v.feed(p + split, s.size() - split) && v.complete();
    ASSERT_EQ(ok, expected) << "split at " << split << " of " << testing::PrintToString(s);
  }
}

TEST(ws_utf8, agrees_with_the_reference) {
  const std::string cases[] = {
      "", "plain ascii, long enough for the 8-byte path", "\xc3\xa9t\xc3\xa9", "\xe2\x82\xac",
      "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",  // U+10FFFF
      "\xf4\x90\x80\x80",                         // above U+10FFFF
      "\xed\xa0\x80",                             // a surrogate
      "\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf",  // overlongs
      "\xc3", "\xe2\x82", "\xf0\x9f\x98",              // cut short
      "\x80", "\xbf", "\xfe", "\xff", "a\xc3\xa9" "b\xe2\x82\xac" "c\xf0\x9f\x98\x80" "d",
      "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80" "edited",
  };
  for (const std::string& c : cases) expect_utf8(c);
  // Random byte strings biased towards valid lead and continuation bytes.
  std::mt19937 rng(12345);
  const unsigned char alphabet[] = {'a', 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf, 0xe0, 0xe1, 0xed,
                                    0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xc0, 0xc1, 0xff};
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 9, '\0');
    for (char& ch : s) ch = static_cast<char>(alphabet[rng() % sizeof alphabet]);
    expect_utf8(s);
  }
}

TEST(ws_frame, headers_both_ways) {
  const std::uint64_t lengths[] = {0, 1, 125, 126, 65535, 65536, (1ull << 32) + 7};
  for (std::uint64_t len : lengths) {
    for (bool masked : {false, true}) {
      unsigned char buf[d::max_header_size];
      const std::size_t n = d::write_header(buf, d::opcode::binary, true, false, len, masked, 0x11223344);
      d::frame_header h;
      std::error_code ec;
      for (std::size_t cut = 0; cut < n; ++cut) EXPECT_EQ(d::parse_header(buf, cut, h, ec), 0u);
      ASSERT_EQ(d::parse_header(buf, n, h, ec), n);
      EXPECT_FALSE(ec);
      EXPECT_EQ(h.length, len);
      EXPECT_EQ(h.masked, masked);
      EXPECT_TRUE(h.fin);
      EXPECT_EQ(h.op, d::opcode::binary);
      if (masked) {
        EXPECT_EQ(h.mask_key, 0x11223344u);
      }
    }
  }
}

TEST(ws_frame, refused_headers) {
  auto refused = [](std::vector<unsigned char> bytes) {
    d::frame_header h;
    std::error_code ec;
    d::parse_header(bytes.data(), bytes.size(), h, ec);
    return ec == ws::error::protocol_violation;
  };
  EXPECT_TRUE(refused({0xa2, 0x00}));                    // RSV2
  EXPECT_TRUE(refused({0x92, 0x00}));                    // RSV3
  EXPECT_TRUE(refused({0x83, 0x00}));                    // opcode 3
  EXPECT_TRUE(refused({0x8b, 0x00}));                    // opcode 0xB
  EXPECT_TRUE(refused({0x09, 0x00}));                    // a fragmented ping
  EXPECT_TRUE(refused({0x89, 0x7e, 0x00, 0x7e}));        // a ping of 126 bytes
  EXPECT_TRUE(refused({0x82, 0x7e, 0x00, 0x10}));        // 16 in the 16-bit form
  EXPECT_TRUE(refused({0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff}));     // 65535 in the 64-bit form
  EXPECT_TRUE(refused({0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}));        // the top bit
  EXPECT_FALSE(refused({0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0}));          // 65536: fine
}

// A masked client frame.
std::string client_frame(d::opcode op, bool fin, std::string_view payload, bool rsv1 = false,
                         std::uint32_t key = 0x5a17c3e9) {
  unsigned char h[d::max_header_size];
  const std::size_t n = d::write_header(h, op, fin, rsv1, payload.size(), true, key);
  std::string out(reinterpret_cast<char*>(h), n);
  std::string body(payload);
  d::apply_mask(reinterpret_cast<unsigned char*>(body.data()), body.size(), key, 0);
  return out + body;
}

// Everything a decoder reports for input fed in pieces at the given cut points, as text.
std::string transcript(std::string input, const std::vector<std::size_t>& cuts, d::decoder_options o) {
  d::frame_decoder dec(o);
  std::string log;
  std::size_t begin = 0, avail = 0;
  std::size_t next_cut = 0;
  for (;;) {
    auto* data = reinterpret_cast<unsigned char*>(input.data()) + begin;
    const auto r = dec.next(data, avail - begin);
    if (r.what == d::frame_decoder::event::failed) return log + "[failed " + r.ec.message() + "]";
    if (r.what == d::frame_decoder::event::need_more) {
      if (avail == input.size()) return log + "[end]";
      avail = next_cut < cuts.size() ? std::max(avail, std::min(cuts[next_cut++], input.size())) : input.size();
      continue;
    }
    begin += r.consumed;
    if (r.what == d::frame_decoder::event::control) {
      log += "[control " + std::to_string(static_cast<int>(r.op)) + " " +
             std::string(reinterpret_cast<char*>(r.payload), r.size) + "]";
      continue;
    }
    // Take one byte at a time, so partial consumption is exercised too.
    const std::size_t take = r.size > 0 ? 1 : 0;
    log.append(reinterpret_cast<char*>(r.payload), take);
    dec.consume_payload(take);
    begin += take;
    if (r.message_end && take == r.size) log += "[end of message]";
  }
}

TEST(ws_frame, decoder_is_independent_of_the_split) {
  std::string input = client_frame(d::opcode::text, false, "Hello, ") + client_frame(d::opcode::ping, true, "p") +
                      client_frame(d::opcode::continuation, false, "") +
                      client_frame(d::opcode::continuation, true, "world") +
                      client_frame(d::opcode::binary, true, std::string(300, 'b')) +
                      client_frame(d::opcode::close, true, "\x03\xe8");
  const d::decoder_options o{true, false, 0};
  const std::string whole = transcript(input, {}, o);
  EXPECT_EQ(whole, "Hello, [control 9 p]world[end of message]" + std::string(300, 'b') +
                       "[end of message][control 8 \x03\xe8][end]");
  for (std::size_t cut = 0; cut <= input.size(); ++cut) {
    ASSERT_EQ(transcript(input, {cut}, o), whole) << "cut at " << cut;
  }
  std::vector<std::size_t> bytewise;
  for (std::size_t i = 1; i <= input.size(); ++i) bytewise.push_back(i);
  EXPECT_EQ(transcript(input, bytewise, o), whole);
}

TEST(ws_frame, decoder_refusals) {
  const d::decoder_options server{true, false, 0};
  auto fails = [&](const std::string& input, d::decoder_options o) {
    return transcript(input, {}, o).find("[failed") != std::string::npos;
  };
  // A continuation without a message, a new message inside a fragmented one.
  EXPECT_TRUE(fails(client_frame(d::opcode::continuation, true, "x"), server));
  EXPECT_TRUE(fails(client_frame(d::opcode::text, false, "a") + client_frame(d::opcode::text, true, "b"), server));
  // Masking against the role: an unmasked frame to a server, a masked one to a client.
  unsigned char h[d::max_header_size];
  std::size_t n = d::write_header(h, d::opcode::text, true, false, 1, false, 0);
  EXPECT_TRUE(fails(std::string(reinterpret_cast<char*>(h), n) + "x", server));
  EXPECT_TRUE(fails(client_frame(d::opcode::text, true, "x"), d::decoder_options{false, false, 0}));
  // RSV1 without permessage-deflate, RSV1 on a continuation, RSV1 on a control frame.
  EXPECT_TRUE(fails(client_frame(d::opcode::text, true, "x", true), server));
  const d::decoder_options deflate{true, true, 0};
  EXPECT_FALSE(fails(client_frame(d::opcode::text, true, "x", true), deflate));
  EXPECT_TRUE(fails(client_frame(d::opcode::text, false, "x", true) +
                        client_frame(d::opcode::continuation, true, "y", true),
                    deflate));
  EXPECT_TRUE(fails(client_frame(d::opcode::ping, true, "x", true), deflate));
  // The size limit, from the declared lengths, before the payload arrives.
  const d::decoder_options limited{true, false, 10};
  EXPECT_FALSE(fails(client_frame(d::opcode::binary, true, std::string(10, 'x')), limited));
  const std::string over = client_frame(d::opcode::binary, false, std::string(6, 'x')) +
                           client_frame(d::opcode::continuation, true, std::string(5, 'x'));
  const std::string log = transcript(over, {}, limited);
  EXPECT_NE(log.find("[failed " + make_error_code(ws::error::message_too_big).message()), std::string::npos) << log;
}

TEST(ws_frame, masking_at_any_offset) {
  std::string data(37, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  const std::uint32_t key = 0xa1b2c3d4;
  std::string whole = data;
  d::apply_mask(reinterpret_cast<unsigned char*>(whole.data()), whole.size(), key, 0);
  for (std::size_t split = 0; split <= data.size(); ++split) {
    std::string parts = data;
    auto* p = reinterpret_cast<unsigned char*>(parts.data());
    const std::size_t off = d::apply_mask(p, split, key, 0);
    d::apply_mask(p + split, parts.size() - split, key, off);
    ASSERT_EQ(parts, whole) << split;
  }
}

TEST(ws_deflate, offers_parsed) {
  d::deflate_params p;
  EXPECT_TRUE(d::parse_deflate_offer("permessage-deflate", p));
  EXPECT_TRUE(d::parse_deflate_offer("permessage-deflate; client_max_window_bits", p));
  EXPECT_TRUE(p.client_max_window_bits_given);
  EXPECT_FALSE(p.client_max_window_bits_value);
  EXPECT_TRUE(d::parse_deflate_offer(
      "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; "
      "client_max_window_bits=\"12\"",
      p));
  EXPECT_TRUE(p.server_no_context_takeover);
  EXPECT_TRUE(p.client_no_context_takeover);
  EXPECT_EQ(p.server_max_window_bits, 10);
  EXPECT_EQ(p.client_max_window_bits, 12);
  EXPECT_FALSE(d::parse_deflate_offer("x-webkit-deflate-frame", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; server_max_window_bits", p));  // a value is required
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; server_max_window_bits=16", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; server_max_window_bits=7", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; server_max_window_bits=010", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; server_no_context_takeover; server_no_context_takeover", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; client_no_context_takeover=1", p));
  EXPECT_FALSE(d::parse_deflate_offer("permessage-deflate; unknown", p));
  std::vector<std::string> elements;
  d::for_each_element("a, b; x=\"1,2\" ,, c", [&](std::string_view e) {
    elements.emplace_back(e);
    return true;
  });
  EXPECT_EQ(elements, (std::vector<std::string>{"a", "b; x=\"1,2\"", "c"}));
}

// Inflates a whole compressed message (without its tail) through buffers of `room` bytes.
std::string inflate_all(d::inflater& inf, const std::string& compressed, std::size_t room) {
  std::string out;
  std::vector<unsigned char> buf(room);
  const auto* in = reinterpret_cast<const unsigned char*>(compressed.data());
  std::size_t left = compressed.size();
  while (left > 0) {
    unsigned char* o = buf.data();
    std::size_t space = room;
    EXPECT_FALSE(inf.run(in, left, o, space));
    out.append(reinterpret_cast<char*>(buf.data()), room - space);
  }
  for (bool done = false; !done;) {
    unsigned char* o = buf.data();
    std::size_t space = room;
    EXPECT_FALSE(inf.finish(o, space, done));
    out.append(reinterpret_cast<char*>(buf.data()), room - space);
  }
  return out;
}

TEST(ws_deflate, round_trips_with_and_without_context) {
  for (bool no_context : {false, true}) {
    d::deflater def(15, no_context, 6);
    d::inflater inf(false);
    std::size_t first_size = 0;
    for (int i = 0; i < 4; ++i) {
      std::string message;
      // 20 KB of words drawn from a small vocabulary: it compresses, but not to nothing, and a repeat of it lies
      // within a 32 KiB window.
      std::uint32_t x = 12345;
      while (message.size() < 20000) {
        x = x * 1103515245u + 12345u;
        message += "word" + std::to_string((x >> 16) % 64) + ' ';
      }
      std::string compressed;
      def.compress(message.data(), message.size() / 2, false, compressed);  // two fragments
      def.compress(message.data() + message.size() / 2, message.size() - message.size() / 2, true, compressed);
      EXPECT_LT(compressed.size(), message.size() / 4);
      EXPECT_EQ(inflate_all(inf, compressed, 1000), message);
      // With context takeover, a repeated message refers to the last one and shrinks; without, it does not.
      if (i == 0) first_size = compressed.size();
      if (i > 0 && !no_context) {
        EXPECT_LT(compressed.size(), first_size / 4);
      } else if (i > 0) {
        EXPECT_EQ(compressed.size(), first_size);
      }
    }
  }
  // Empty messages, and a message whose last fragment is empty: the flush after no input writes nothing, and the
  // receiver's tail must still complete a valid stream.
  {
    d::deflater def(15, false, 6);
    d::inflater inf(false);
    for (int i = 0; i < 3; ++i) {
      std::string compressed;
      def.compress("", 0, true, compressed);
      EXPECT_FALSE(compressed.empty());
      EXPECT_EQ(inflate_all(inf, compressed, 64), "");
      compressed.clear();
      def.compress("abc", 3, false, compressed);
      def.compress("", 0, true, compressed);
      EXPECT_EQ(inflate_all(inf, compressed, 64), "abc");
    }
  }
  d::inflater inf(false);
  unsigned char junk[] = {0xff, 0xff, 0xff, 0xff};
  const unsigned char* in = junk;
  std::size_t left = sizeof junk;
  unsigned char out[64];
  unsigned char* o = out;
  std::size_t space = sizeof out;
  EXPECT_EQ(inf.run(in, left, o, space), ws::error::bad_compression);
}

TEST(ws_error, messages_and_codes) {
  std::error_code ec = ws::close_code::normal;
  EXPECT_STREQ(ec.category().name(), "tern.ws");
  EXPECT_TRUE(ws::is_close_code(ec));
  EXPECT_FALSE(ws::is_close_code(ws::error::invalid_utf8));
  EXPECT_NE(ec.message().find("1000"), std::string::npos);
  EXPECT_NE(std::error_code(ws::close_code{4001}).message().find("4001"), std::string::npos);
  for (unsigned c : {1000u, 1001u, 1002u, 1003u, 1007u, 1011u, 1014u, 3000u, 4999u}) {
    EXPECT_TRUE(ws::sendable_close_code(c));
  }
  for (unsigned c : {0u, 999u, 1004u, 1005u, 1006u, 1015u, 2999u, 5000u}) EXPECT_FALSE(ws::sendable_close_code(c));
}

}  // namespace
