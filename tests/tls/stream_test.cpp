// tls::stream between two tern ends on one loop, on both backends: handshakes and what they refuse (an unknown CA,
// a host name the certificate does not carry, ALPN without a common protocol, a client without a certificate),
// ALPN and SNI, session resumption, the ends of a connection (close_notify each way, a peer that closes without it,
// a reset), cancellation and timeouts, malformed records, 16 MB each way at once, and a TLS stream over a Unix
// socket and under a buffered_reader.
#include "tls_support.hpp"

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>

namespace {

using namespace tern_test;

class tls_stream_test : public backend_test {};
TERN_INSTANTIATE_BACKENDS(tls_stream_test);

// Writes text on one side and reads it whole on the other.
tern::task<bool> carries(tls_tcp& from, tls_tcp& to, std::string_view text) {
  auto [wec, w] = co_await from.write_all(tern::const_buffer(text.data(), text.size()));
  EXPECT_OK(wec);
  std::string got(text.size(), '\0');
  auto [rec, r] = co_await to.read_exact(tern::mutable_buffer(got.data(), got.size()));
  EXPECT_OK(rec);
  EXPECT_EQ(got, text);
  co_return !wec && !rec && got == text;
}

TEST_P(tls_stream_test, handshake_then_data_both_ways) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    EXPECT_EQ(p.client.protocol_version(), "TLSv1.3");
    EXPECT_EQ(p.server.protocol_version(), "TLSv1.3");
    EXPECT_EQ(p.client.cipher(), p.server.cipher());
    EXPECT_EQ(p.server.server_name(), "localhost");  // SNI, as the client sent it
    EXPECT_FALSE(p.client.session_reused());
    EXPECT_TRUE(co_await carries(p.client, p.server, "hello, server"));
    EXPECT_TRUE(co_await carries(p.server, p.client, "hello, client"));
  }(ctx));
}

TEST_P(tls_stream_test, tls_1_2_when_the_server_offers_no_more) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.set_max_version(tls::version::tls1_2));
    CO_ASSERT_OK(server_ctx.set_cipher_list("ECDHE-ECDSA-CHACHA20-POLY1305"));
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(p.client.protocol_version(), "TLSv1.2");
    EXPECT_EQ(p.client.cipher(), "ECDHE-ECDSA-CHACHA20-POLY1305");
    std::string big(100'000, 'x');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
    EXPECT_TRUE(co_await carries(p.client, p.server, big));
  }(ctx));
}

TEST_P(tls_stream_test, a_minimum_of_tls_1_3_refuses_a_tls_1_2_server) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    CO_ASSERT_OK(client_ctx.set_min_version(tls::version::tls1_3));
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.set_max_version(tls::version::tls1_2));
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    EXPECT_EQ(cec.category(), tls::openssl_category());
    EXPECT_EQ(sec.category(), tls::openssl_category());
    EXPECT_EQ(sec.message(), "unsupported protocol");
  }(ctx));
}

TEST_P(tls_stream_test, a_host_name_the_certificate_lacks_is_refused) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx, "wrong.test");
    auto [cec, sec] = co_await handshake_both(p);
    EXPECT_EQ(cec.category(), tls::verify_category()) << describe(cec);
    EXPECT_EQ(cec.message(), "hostname mismatch");
    EXPECT_EQ(sec.category(), tls::openssl_category()) << describe(sec);
    EXPECT_EQ(sec.message(), "sslv3 alert bad certificate");
    // The same certificate is accepted for the names it carries, and without a name check.
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx, "127.0.0.1");
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
    tls::context unchecked = client_context();
    unchecked.set_verify_host_name(false);
    tls_pair r = co_await tls_over_tcp(ctx, unchecked, server_ctx, "wrong.test");
    auto [rc, rs] = co_await handshake_both(r);
    EXPECT_OK(rc);
    EXPECT_OK(rs);
  }(ctx));
}

TEST_P(tls_stream_test, a_certificate_from_an_unknown_ca_is_refused) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context(pki().rogue_cert, pki().rogue_key);
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    EXPECT_EQ(cec.category(), tls::verify_category()) << describe(cec);
    EXPECT_EQ(cec.message(), "unable to get local issuer certificate");
    EXPECT_EQ(sec.message(), "tlsv1 alert unknown ca") << describe(sec);
    // Without verification the same server is accepted.
    tls::context trusting(tls::role::client);
    trusting.set_verify_mode(tls::verify_mode::none);
    tls_pair q = co_await tls_over_tcp(ctx, trusting, server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
  }(ctx));
}

TEST_P(tls_stream_test, alpn_takes_the_servers_first_choice_among_the_offers) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    CO_ASSERT_OK(client_ctx.set_alpn_protocols({"h2", "http/1.1"}));
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.set_alpn_protocols({"spdy/3", "http/1.1", "h2"}));
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(p.client.alpn_protocol(), "http/1.1");
    EXPECT_EQ(p.server.alpn_protocol(), "http/1.1");

    // No protocol in common: refused (RFC 7301), not silently without ALPN.
    tls::context other_client = client_context();
    CO_ASSERT_OK(other_client.set_alpn_protocols({"imap"}));
    tls_pair q = co_await tls_over_tcp(ctx, other_client, server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_EQ(qc.message(), "tlsv1 alert no application protocol") << describe(qc);
    EXPECT_EQ(qs.message(), "no application protocol") << describe(qs);

    // A client that offers nothing gets no protocol, and no refusal.
    tls::context plain_client = client_context();
    tls_pair r = co_await tls_over_tcp(ctx, plain_client, server_ctx);
    auto [rc, rs] = co_await handshake_both(r);
    EXPECT_OK(rc);
    EXPECT_OK(rs);
    EXPECT_EQ(r.client.alpn_protocol(), "");
    EXPECT_TRUE(server_ctx.set_alpn_protocols({std::string_view()}) == std::errc::invalid_argument);
  }(ctx));
}

TEST_P(tls_stream_test, sni_selects_the_servers_context_by_name) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls::context other_ctx = server_context(pki().other_cert, pki().other_key);
    CO_ASSERT_OK(other_ctx.set_alpn_protocols({"other-proto"}));
    CO_ASSERT_OK(server_ctx.add_server_name("Other.Test", other_ctx));
    EXPECT_TRUE(server_ctx.add_server_name("self", server_ctx) == std::errc::invalid_argument);
    CO_ASSERT_OK(client_ctx.set_alpn_protocols({"other-proto"}));
    // The client checks the name: only other.test's certificate passes for "other.test".
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx, "other.test");
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_EQ(p.server.server_name(), "other.test");
    EXPECT_EQ(p.client.alpn_protocol(), "other-proto");  // the chosen context's ALPN list answered
    EXPECT_TRUE(co_await carries(p.client, p.server, "via other.test"));
    // Any other name gets the default context's certificate.
    tls_pair q = co_await tls_over_tcp(ctx, client_context(), server_ctx, "localhost");
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
  }(ctx));
}

TEST_P(tls_stream_test, sni_callback_chooses_for_names_the_map_does_not_know) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context server_ctx = server_context();
    tls::context other_ctx = server_context(pki().other_cert, pki().other_key);
    std::vector<std::string> asked;
    server_ctx.set_server_name_callback([&](std::string_view name) -> std::optional<tls::context> {
      asked.emplace_back(name);
      if (name == "other.test") return other_ctx;
      return std::nullopt;
    });
    tls_pair p = co_await tls_over_tcp(ctx, client_context(), server_ctx, "other.test");
    auto [cec, sec] = co_await handshake_both(p);
    EXPECT_OK(cec);
    EXPECT_OK(sec);
    tls_pair q = co_await tls_over_tcp(ctx, client_context(), server_ctx, "localhost");
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
    EXPECT_EQ(asked, (std::vector<std::string>{"other.test", "localhost"}));
  }(ctx));
}

// One connection whose session is kept, then a second that offers it.
tern::task<void> resumption(tern::io_context& ctx, tls::version v, bool tickets, bool expect_reuse) {
  tls::context client_ctx = client_context();
  CO_ASSERT_OK(client_ctx.set_max_version(v));
  tls::context server_ctx = server_context();
  server_ctx.set_session_tickets(tickets);
  tls::session kept;
  {
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_FALSE(p.client.session_reused());
    // TLS 1.3 tickets come after the handshake: a read takes them in.
    CO_ASSERT(co_await carries(p.server, p.client, "x"));
    kept = p.client.session();
    EXPECT_TRUE(kept);
    EXPECT_EQ(kept.resumable(), expect_reuse);
  }
  // The first connection was dropped without close_notify, after it did its work: its session stays usable.
  EXPECT_EQ(kept.resumable(), expect_reuse);
  tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
  const std::error_code offered = q.client.set_session(kept);
  if (kept.resumable()) {
    EXPECT_OK(offered);
  } else {
    EXPECT_EC(offered, tls::error::no_session);
  }
  auto [cec, sec] = co_await handshake_both(q);
  CO_ASSERT_OK(cec);
  CO_ASSERT_OK(sec);
  EXPECT_EQ(q.client.session_reused(), expect_reuse);
  EXPECT_EQ(q.server.session_reused(), expect_reuse);
  EXPECT_TRUE(co_await carries(q.client, q.server, "resumed?"));
}

TEST_P(tls_stream_test, a_kept_session_resumes_tls_1_3) {
  run_bounded(ctx, resumption(ctx, tls::version::tls1_3, true, true));
}

TEST_P(tls_stream_test, a_kept_session_resumes_tls_1_2) {
  run_bounded(ctx, resumption(ctx, tls::version::tls1_2, true, true));
}

TEST_P(tls_stream_test, no_resumption_when_the_server_issues_no_tickets) {
  run_bounded(ctx, resumption(ctx, tls::version::tls1_3, false, false));
}

TEST_P(tls_stream_test, a_truncated_connection_spoils_its_session) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls::session kept;
    {
      tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
      auto [cec, sec] = co_await handshake_both(p);
      CO_ASSERT_OK(cec);
      CO_ASSERT_OK(sec);
      CO_ASSERT(co_await carries(p.server, p.client, "x"));
      kept = p.client.session();
      EXPECT_TRUE(kept.resumable());
      p.server.next_layer().close();
      char buf[4];
      auto [ec, n] = co_await p.client.read_some(buf);
      EXPECT_EC(ec, tls::error::truncated);
    }
    EXPECT_FALSE(kept.resumable());  // someone may have cut the connection: its session is not offered again
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    EXPECT_EC(q.client.set_session(kept), tls::error::no_session);
    EXPECT_EC(q.client.set_session(tls::session()), tls::error::no_session);
  }(ctx));
}

TEST_P(tls_stream_test, a_read_takes_every_record_that_has_arrived) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    // Ten records, each sent before the next is made: on loopback all of them wait in the server's socket when it
    // reads, and one read of the socket brings them all into the stream, where OpenSSL (reading ahead) takes them
    // as a block. The read must decrypt them all, not stop after the first because the stream's own buffer is empty.
    CO_ASSERT_OK(p.client.next_layer().set_no_delay(true));  // each record leaves at once, not behind an ACK
    std::string sent;
    for (int i = 0; i < 10; ++i) {
      const std::string chunk = "record " + std::to_string(i) + std::string(90, static_cast<char>('a' + i));
      CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer(chunk.data(), chunk.size()))).ec);
      sent += chunk;
    }
    std::string got(4096, '\0');
    auto [rec, n] = co_await p.server.read_some(tern::mutable_buffer(got.data(), got.size()));
    CO_ASSERT_OK(rec);
    got.resize(n);
    EXPECT_EQ(got, sent);
  }(ctx));
}

TEST_P(tls_stream_test, close_notify_both_ways_is_a_clean_end) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    // The client closes its side; the server reads the data before it, then eof; it answers after that (TLS 1.3
    // half-close) and closes too; the client's shutdown() sees the answer's close_notify.
    CO_ASSERT_OK((co_await p.client.write_all(tern::const_buffer("last words"))).ec);
    CO_ASSERT_OK(co_await p.client.shutdown_send());
    char buf[64];
    auto [rec, n] = co_await p.server.read_exact(tern::mutable_buffer(buf, 10));
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, n), "last words");
    auto [eec, m] = co_await p.server.read_some(buf);
    EXPECT_EC(eec, tern::error::eof);
    EXPECT_EQ(m, 0u);
    CO_ASSERT_OK((co_await p.server.write_all(tern::const_buffer("reply"))).ec);
    auto [both_client, both_server] = co_await tern::when_all(p.client.shutdown(), p.server.shutdown());
    EXPECT_OK(both_client);  // read "reply" (dropped), then the server's close_notify
    EXPECT_OK(both_server);  // the client's close_notify had come already
    auto [again, k] = co_await p.server.read_some(buf);
    EXPECT_EC(again, tern::error::eof);  // the end stays clean
    // After shutdown the sending side is closed.
    auto [wec, w] = co_await p.client.write_some(tern::const_buffer("more"));
    EXPECT_EQ(wec.category(), tls::openssl_category()) << describe(wec);
    EXPECT_EQ(wec.message(), "protocol is shutdown");
  }(ctx));
}

TEST_P(tls_stream_test, a_peer_that_closes_without_close_notify_is_truncation) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    CO_ASSERT_OK((co_await p.server.write_all(tern::const_buffer("partial"))).ec);
    p.server.next_layer().close();  // a FIN, without close_notify
    char buf[64];
    auto [rec, n] = co_await p.client.read_some(buf);  // the data before the cut arrives first
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, n), "partial");
    auto [tec, m] = co_await p.client.read_some(buf);
    EXPECT_EC(tec, tls::error::truncated);
    EXPECT_NE(tec, tern::error::eof);
    EXPECT_TRUE(tec == tern::condition::end_of_stream) << "the one test for every end of a stream";
    auto [again, k] = co_await p.client.read_some(buf);
    EXPECT_EC(again, tls::error::truncated);
    // A shutdown that waits for a close_notify that never comes reports the same.
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    CO_ASSERT_OK(qc);
    CO_ASSERT_OK(qs);
    q.server.next_layer().close();
    EXPECT_EC(co_await q.client.shutdown(), tls::error::truncated);
  }(ctx));
}

TEST_P(tls_stream_test, a_reset_peer_is_reported_as_a_reset) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    set_linger_reset(p.server.next_layer().native_handle());
    p.server.next_layer().close();
    char buf[16];
    auto [rec, n] = co_await p.client.read_some(buf);
    EXPECT_EC(rec, std::errc::connection_reset);
  }(ctx));
}

TEST_P(tls_stream_test, a_pending_read_is_cancelled_and_the_stream_goes_on) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    std::stop_source stop;
    std::array<char, 64> buf{};
    auto reading = tern::spawn(ctx, p.client.read_some(buf), stop.get_token());
    co_await tern::sleep_for(20ms);  // the read is waiting for the socket
    stop.request_stop();
    auto [rec, n] = co_await std::move(reading);
    EXPECT_EC(rec, tern::error::operation_canceled);
    EXPECT_EQ(n, 0u);
    // Nothing was lost or broken: the next exchange works both ways.
    EXPECT_TRUE(co_await carries(p.server, p.client, "after the cancel"));
    EXPECT_TRUE(co_await carries(p.client, p.server, "and back"));
    // with_timeout on a read does the same, with timed_out.
    auto [tec, m] = co_await tern::with_timeout(p.client.read_some(buf), 20ms);
    EXPECT_EC(tec, tern::error::timed_out);
    EXPECT_TRUE(co_await carries(p.server, p.client, "after the timeout"));
  }(ctx));
}

TEST_P(tls_stream_test, closing_the_socket_under_a_pending_read) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    std::array<char, 64> buf{};
    auto reading = tern::spawn(ctx, p.client.read_some(buf));
    co_await tern::sleep_for(20ms);
    p.client.next_layer().close();
    auto [rec, n] = co_await std::move(reading);
    EXPECT_EC(rec, tern::error::operation_canceled);
    auto [again, m] = co_await p.client.read_some(buf);
    EXPECT_EC(again, std::errc::bad_file_descriptor);
    // The loop goes on: a new connection works.
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
    EXPECT_TRUE(co_await carries(q.client, q.server, "still here"));
  }(ctx));
}

TEST_P(tls_stream_test, a_handshake_against_a_silent_peer_times_out) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    socket_pair raw = co_await connected_pair(ctx);  // the server side never answers
    tls_tcp client(std::move(raw.client), client_ctx);
    const auto start = clock_type::now();
    const std::error_code ec = co_await tern::with_timeout(client.handshake(), 100ms);
    const auto took = clock_type::now() - start;
    EXPECT_EC(ec, tern::error::timed_out);
    EXPECT_GE(took, 100ms);
    EXPECT_LT(took, 5s);
    // The silent side did receive a ClientHello: a handshake record (type 22).
    char first = 0;
    auto [rec, n] = co_await raw.server.read_some(tern::mutable_buffer(&first, 1));
    EXPECT_OK(rec);
    EXPECT_EQ(first, 22);
  }(ctx));
}

TEST_P(tls_stream_test, a_malformed_record_is_an_error_and_the_loop_goes_on) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    // An application-data record whose 32 bytes were not made with the connection's keys.
    std::array<unsigned char, 37> forged{23, 3, 3, 0, 32};
    for (std::size_t i = 5; i < forged.size(); ++i) forged[i] = static_cast<unsigned char>(i * 37);
    CO_ASSERT_OK((co_await p.client.next_layer().write_all(forged)).ec);
    char buf[64];
    auto [rec, n] = co_await p.server.read_some(buf);
    EXPECT_EQ(rec.category(), tls::openssl_category()) << describe(rec);
    EXPECT_EQ(rec.message(), "decryption failed or bad record mac");
    auto [again, m] = co_await p.server.read_some(buf);  // kept: OpenSSL is not called again
    EXPECT_EQ(again, rec);
    auto [wec, w] = co_await p.server.write_some(tern::const_buffer("x"));
    EXPECT_EQ(wec, rec);
    // Bytes that are not TLS at all, instead of a ClientHello.
    socket_pair raw = co_await connected_pair(ctx);
    tls_tcp server(std::move(raw.server), server_ctx);
    CO_ASSERT_OK((co_await raw.client.write_all(tern::const_buffer("HELO mail.example.com\r\n"))).ec);
    const std::error_code hec = co_await server.handshake();
    EXPECT_EQ(hec.category(), tls::openssl_category()) << describe(hec);
    EXPECT_EQ(hec.message(), "wrong version number");
    // The loop goes on.
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_OK(qc);
    EXPECT_OK(qs);
  }(ctx));
}

TEST_P(tls_stream_test, client_certificates_when_the_server_requires_them) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context server_ctx = server_context();
    CO_ASSERT_OK(server_ctx.load_verify_file(pki().ca));
    server_ctx.set_verify_mode(tls::verify_mode::peer_required);
    tls::context with_cert = client_context();
    CO_ASSERT_OK(with_cert.use_certificate_chain_file(pki().client_cert));
    CO_ASSERT_OK(with_cert.use_private_key_file(pki().client_key));
    tls_pair p = co_await tls_over_tcp(ctx, with_cert, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    X509* peer = SSL_get0_peer_certificate(p.server.native_handle());
    CO_ASSERT(peer != nullptr);
    char cn[64] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
    EXPECT_STREQ(cn, "tern test client");
    // Without one the server refuses. In TLS 1.3 the client's handshake is over before the server has checked,
    // so the client learns it from the alert, on its first read.
    tls_pair q = co_await tls_over_tcp(ctx, client_context(), server_ctx);
    auto [qc, qs] = co_await handshake_both(q);
    EXPECT_EQ(qs.message(), "peer did not return a certificate") << describe(qs);
    EXPECT_OK(qc);
    char buf[8];
    auto [rec, n] = co_await q.client.read_some(buf);
    EXPECT_EQ(rec.message(), "tlsv13 alert certificate required") << describe(rec);
  }(ctx));
}

TEST_P(tls_stream_test, reads_and_writes_before_handshake_shake_hands_themselves) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    // The client's write waits for the server's flight, so the two run together.
    char buf[21];
    auto [w, r] = co_await tern::when_all(p.client.write_all(tern::const_buffer("no handshake() called")),
                                          p.server.read_exact(buf));
    CO_ASSERT_OK(w.ec);
    CO_ASSERT_OK(r.ec);
    EXPECT_EQ(std::string_view(buf, r.value), "no handshake() called");
    EXPECT_TRUE(co_await carries(p.server, p.client, "nor here"));
    EXPECT_EQ(p.client.protocol_version(), "TLSv1.3");
    // A read and a write of the same stream, both started before the handshake, on each side: whichever needs the
    // peer's flight first reads it, and the other goes on with what it brought.
    tls_pair q = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    char from_client[6], from_server[6];
    auto [a, b, c, d] = co_await tern::when_all(
        q.client.read_exact(from_server), q.client.write_all(tern::const_buffer("client")),
        q.server.read_exact(from_client), q.server.write_all(tern::const_buffer("server")));
    EXPECT_OK(a.ec);
    EXPECT_OK(b.ec);
    EXPECT_OK(c.ec);
    EXPECT_OK(d.ec);
    EXPECT_EQ(std::string_view(from_client, 6), "client");
    EXPECT_EQ(std::string_view(from_server, 6), "server");
  }(ctx));
}

// Writes all of data in pieces of varying size, asking the peer for a TLS 1.3 KeyUpdate every MiB or so (the peer's
// reader then answers while its own writer is sending); returns the error, if any.
tern::task<std::error_code> send_pattern(tls_tcp& s, const std::vector<char>& data) {
  std::size_t at = 0;
  for (std::size_t i = 0; at < data.size(); ++i) {
    const std::size_t piece = std::min<std::size_t>(data.size() - at, 1 + (i * 7919) % 200'000);
    if (i % 10 == 9 && SSL_key_update(s.native_handle(), SSL_KEY_UPDATE_REQUESTED) != 1) {
      co_return std::make_error_code(std::errc::protocol_error);
    }
    auto [ec, n] = co_await s.write_all(tern::const_buffer(data.data() + at, piece));
    if (ec) co_return ec;
    at += n;
  }
  co_return std::error_code{};
}

// Reads data.size() bytes in reads of varying size and compares each byte with data; the first mismatch's offset
// (or data.size()) in matched.
tern::task<std::error_code> receive_pattern(tls_tcp& s, const std::vector<char>& data, std::size_t& matched) {
  std::vector<char> buf(100'000);
  std::size_t at = 0;
  matched = data.size();
  for (std::size_t i = 0; at < data.size(); ++i) {
    const std::size_t want = std::min<std::size_t>(buf.size(), 1 + (i * 104729) % buf.size());
    auto [ec, n] = co_await s.read_some(tern::mutable_buffer(buf.data(), std::min(want, data.size() - at)));
    if (ec) co_return ec;
    if (matched == data.size() && std::memcmp(buf.data(), data.data() + at, n) != 0) {
      for (std::size_t k = 0; k < n; ++k) {
        if (buf[k] != data[at + k]) {
          matched = at + k;
          break;
        }
      }
    }
    at += n;
  }
  co_return std::error_code{};
}

TEST_P(tls_stream_test, full_duplex_16_mb_each_way_at_once_with_key_updates) {
  run_bounded(
      ctx,
      [](tern::io_context& ctx) -> tern::task<void> {
        tls::context client_ctx = client_context();
        tls::context server_ctx = server_context();
        tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
        // Small kernel buffers: sends often leave part of the output buffer behind, which keeps sends in flight
        // when the readers append their KeyUpdate answers.
        for (tls_tcp* s : {&p.client, &p.server}) {
          CO_ASSERT_OK(s->next_layer().set_send_buffer_size(24 * 1024));
          CO_ASSERT_OK(s->next_layer().set_receive_buffer_size(24 * 1024));
        }
        auto [cec, sec] = co_await handshake_both(p);
        CO_ASSERT_OK(cec);
        CO_ASSERT_OK(sec);
        constexpr std::size_t size = 16 << 20;
        const std::vector<char> up = make_pattern(size, 1);
        const std::vector<char> down = make_pattern(size, 2);
        std::size_t up_matched = 0, down_matched = 0;
        // Four tasks: each stream reads and writes at the same time, on one loop.
        auto [a, b, c, d] =
            co_await tern::when_all(send_pattern(p.client, up), receive_pattern(p.server, up, up_matched),
                                    send_pattern(p.server, down), receive_pattern(p.client, down, down_matched));
        EXPECT_OK(a);
        EXPECT_OK(b);
        EXPECT_OK(c);
        EXPECT_OK(d);
        EXPECT_EQ(up_matched, size) << "client -> server differs from this offset";
        EXPECT_EQ(down_matched, size) << "server -> client differs from this offset";
        // Still in step afterwards.
        EXPECT_TRUE(co_await carries(p.client, p.server, "done"));
      }(ctx),
      120s);
}

TEST_P(tls_stream_test, a_read_answers_a_key_update_while_the_write_is_stuck) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    CO_ASSERT_OK(p.client.next_layer().set_send_buffer_size(16 * 1024));
    CO_ASSERT_OK(p.server.next_layer().set_receive_buffer_size(16 * 1024));
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    // The client's write stalls: the server does not read yet.
    const std::vector<char> data = make_pattern(4 << 20, 4);
    auto writing = tern::spawn(ctx, p.client.write_all(data));
    co_await tern::sleep_for(50ms);
    // The server asks for a KeyUpdate. The client's read must answer it (into its output buffer, behind the records
    // of the stuck send) and deliver the data after it, without waiting for that send.
    CO_ASSERT(SSL_key_update(p.server.native_handle(), SSL_KEY_UPDATE_REQUESTED) == 1);
    CO_ASSERT_OK((co_await p.server.write_all(tern::const_buffer("ku"))).ec);
    char small[2];
    auto [rec, n] = co_await tern::with_timeout(p.client.read_exact(small), 2s);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(small, n), "ku");
    // Now the server reads: the records from before the answer, the answer, and the ones after it (new keys).
    std::vector<char> got(data.size());
    auto [gec, g] = co_await p.server.read_exact(got);
    CO_ASSERT_OK(gec);
    auto [wec, w] = co_await std::move(writing);
    CO_ASSERT_OK(wec);
    EXPECT_TRUE(got == data);
    EXPECT_TRUE(co_await carries(p.client, p.server, "new keys both ways"));
    EXPECT_TRUE(co_await carries(p.server, p.client, "and back"));
  }(ctx));
}

TEST_P(tls_stream_test, a_write_cut_short_by_a_timeout_loses_nothing_it_took) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    CO_ASSERT_OK(p.client.next_layer().set_send_buffer_size(16 * 1024));
    CO_ASSERT_OK(p.server.next_layer().set_receive_buffer_size(16 * 1024));
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    // The server does not read: the write stalls once the kernel's buffers are full.
    const std::vector<char> data = make_pattern(8 << 20, 3);
    auto [wec, taken] = co_await tern::with_timeout(p.client.write_all(data), 200ms);
    EXPECT_EC(wec, tern::error::timed_out);
    EXPECT_GT(taken, 0u);
    EXPECT_LT(taken, data.size());
    // What the write took is sent before the next write's bytes, and nothing else comes between.
    auto sending = tern::spawn(ctx, p.client.write_all(tern::const_buffer("|tail")));
    std::vector<char> got(taken + 5);
    auto [rec, n] = co_await p.server.read_exact(got);
    CO_ASSERT_OK(rec);
    auto [tec, t] = co_await std::move(sending);
    EXPECT_OK(tec);
    EXPECT_EQ(std::memcmp(got.data(), data.data(), taken), 0);
    EXPECT_EQ(std::string_view(got.data() + taken, 5), "|tail");
  }(ctx));
}

TEST_P(tls_stream_test, over_a_unix_stream_socket) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    auto [pec, ends] = tern::net::unix_stream_socket::pair(ctx);
    CO_ASSERT_OK(pec);
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    tls::stream<tern::net::unix_stream_socket> client(std::move(ends.first), client_ctx);
    tls::stream<tern::net::unix_stream_socket> server(std::move(ends.second), server_ctx);
    CO_ASSERT_OK(client.set_host_name("localhost"));
    auto [cec, sec] = co_await tern::when_all(client.handshake(), server.handshake());
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    CO_ASSERT_OK((co_await client.write_all(tern::const_buffer("over AF_UNIX"))).ec);
    char buf[12];
    auto [rec, n] = co_await server.read_exact(buf);
    CO_ASSERT_OK(rec);
    EXPECT_EQ(std::string_view(buf, n), "over AF_UNIX");
    auto [a, b] = co_await tern::when_all(client.shutdown(), server.shutdown());
    EXPECT_OK(a);
    EXPECT_OK(b);
  }(ctx));
}

TEST_P(tls_stream_test, lines_through_a_buffered_reader_and_writer) {
  run_bounded(ctx, [](tern::io_context& ctx) -> tern::task<void> {
    std::optional<tls_pair> shaken = co_await shaken_pair(ctx);
    CO_ASSERT(shaken);
    tls_pair& p = *shaken;
    tern::buffered_writer out(p.client, 4096);
    for (int i = 0; i < 100; ++i) {
      const std::string line = "line " + std::to_string(i) + "\n";
      CO_ASSERT_OK((co_await out.write(tern::const_buffer(line.data(), line.size()))).ec);
    }
    CO_ASSERT_OK(co_await out.flush());
    CO_ASSERT_OK(co_await p.client.shutdown_send());
    tern::buffered_reader in(p.server, 256);
    int count = 0;
    for (;;) {
      auto [ec, line] = co_await in.read_line();
      if (ec) {
        EXPECT_EC(ec, tern::error::eof);
        break;
      }
      EXPECT_EQ(line, "line " + std::to_string(count));
      ++count;
    }
    EXPECT_EQ(count, 100);
  }(ctx));
}

TEST_P(tls_stream_test, kernel_tls_is_offered_only_where_the_kernel_has_it) {
  const std::string ulps = read_file("/proc/sys/net/ipv4/tcp_available_ulp");
  const bool kernel_has_tls = (" " + ulps + " ").find(" tls") != std::string::npos;
  EXPECT_EQ(tls::ktls_available(), kernel_has_tls) << "tcp_available_ulp: " << ulps;
  run_bounded(ctx, [](tern::io_context& ctx, bool kernel_has_tls) -> tern::task<void> {
    tls::context client_ctx = client_context();
    tls::context server_ctx = server_context();
    const std::error_code ec = server_ctx.enable_ktls();
    if (kernel_has_tls) {
      EXPECT_OK(ec);
    } else {
      EXPECT_EC(ec, tls::error::ktls_unavailable);
      EXPECT_EQ(SSL_CTX_get_options(server_ctx.native_handle()) & SSL_OP_ENABLE_KTLS, 0u);
    }
    // Either way the records are encrypted in user space (the fallback), and the connection works.
    tls_pair p = co_await tls_over_tcp(ctx, client_ctx, server_ctx);
    auto [cec, sec] = co_await handshake_both(p);
    CO_ASSERT_OK(cec);
    CO_ASSERT_OK(sec);
    EXPECT_FALSE(p.server.ktls_send());
    EXPECT_FALSE(p.server.ktls_receive());
    EXPECT_TRUE(co_await carries(p.server, p.client, "encrypted by OpenSSL"));

    // OpenSSL asked to offload anyway (the option set underneath enable_ktls) offers the keys to the stream's BIO,
    // which declines: TLS 1.3 and 1.2 connections still work, encrypted in user space.
    for (tls::version v : {tls::version::tls1_3, tls::version::tls1_2}) {
      tls::context forced_server = server_context();
      tls::context forced_client = client_context();
      CO_ASSERT_OK(forced_client.set_max_version(v));
      SSL_CTX_set_options(forced_server.native_handle(), SSL_OP_ENABLE_KTLS);
      SSL_CTX_set_options(forced_client.native_handle(), SSL_OP_ENABLE_KTLS);
      tls_pair q = co_await tls_over_tcp(ctx, forced_client, forced_server);
      auto [qc, qs] = co_await handshake_both(q);
      CO_ASSERT_OK(qc);
      CO_ASSERT_OK(qs);
      EXPECT_FALSE(q.client.ktls_send());
      EXPECT_FALSE(q.client.ktls_receive());
      EXPECT_FALSE(q.server.ktls_send());
      EXPECT_TRUE(co_await carries(q.client, q.server, "offload declined"));
      EXPECT_TRUE(co_await carries(q.server, q.client, "both ways"));
      auto [a, b] = co_await tern::when_all(q.client.shutdown(), q.server.shutdown());
      EXPECT_OK(a);
      EXPECT_OK(b);
    }
  }(ctx, kernel_has_tls));
}

}  // namespace

namespace {

// A layer above a TLS stream (ws::stream) makes the same check through it.
static_assert(tern::loop_bound<tls_tcp>);

// A TLS stream used from another worker than its socket's: every operation refuses at once with wrong_loop, before
// OpenSSL or the stream's buffers are touched, so the stream goes on working on its own loop. (A write from the
// wrong thread used to encrypt its records, fail to send them, and leave the stream's sending side failed.)
TEST_P(tls_stream_test, operations_from_another_worker_are_refused_and_change_nothing) {
  tern::runtime rt(runtime_options_for(GetParam(), 2));
  const bool ok = rt.block_on([](tern::runtime& rt) -> tern::task<bool> {
    co_await rt.switch_to(0);
    std::optional<tls_pair> shaken = co_await shaken_pair(rt.worker(0));
    if (!shaken) co_return false;
    tls_pair& p = *shaken;
    co_await rt.switch_to(1);
    char buf[16];
    const auto [wec, wn] = co_await p.client.write_all(tern::const_buffer("from worker 1", 13));
    const auto [rec, rn] = co_await p.server.read_some(tern::mutable_buffer(buf, sizeof buf));
    const std::error_code sec = co_await p.client.shutdown_send();
    co_await rt.switch_to(0);
    EXPECT_EC(wec, tern::error::wrong_loop);
    EXPECT_EQ(wn, 0u);
    EXPECT_EC(rec, tern::error::wrong_loop);
    EXPECT_EC(sec, tern::error::wrong_loop);
    const bool both = co_await carries(p.client, p.server, "on worker 0 again") &&
                      co_await carries(p.server, p.client, "and back");
    co_return both;
  }(rt));
  EXPECT_TRUE(ok);
}

}  // namespace
