// tls::context's configuration: certificates and keys from files and from memory, what a bad one is refused with
// (OpenSSL's reason, or the system's error for a missing file), trust stores, versions, cipher lists, ALPN names,
// and the error categories' messages.
#include "tls_support.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace {

using namespace tern_test;

TEST(tls_context, certificate_and_key_from_files) {
  tls::context c(tls::role::server);
  EXPECT_EQ(c.role(), tls::role::server);
  EXPECT_EQ(c.get_verify_mode(), tls::verify_mode::none);
  EXPECT_OK(c.use_certificate_chain_file(pki().server_cert));
  EXPECT_OK(c.use_private_key_file(pki().server_key));
  EXPECT_EQ(SSL_CTX_check_private_key(c.native_handle()), 1);
}

TEST(tls_context, certificate_and_key_from_memory) {
  tls::context c(tls::role::server);
  EXPECT_OK(c.use_certificate_chain(read_file(pki().server_cert) + read_file(pki().ca)));  // leaf and chain
  EXPECT_OK(c.use_private_key(read_file(pki().server_key)));
  EXPECT_EQ(SSL_CTX_check_private_key(c.native_handle()), 1);
  STACK_OF(X509)* chain = nullptr;
  ASSERT_EQ(SSL_CTX_get0_chain_certs(c.native_handle(), &chain), 1);
  EXPECT_EQ(sk_X509_num(chain), 1);
}

TEST(tls_context, a_key_that_does_not_match_is_refused_and_the_right_one_still_fits) {
  tls::context c(tls::role::server);
  ASSERT_OK(c.use_certificate_chain_file(pki().server_cert));
  const std::error_code ec = c.use_private_key_file(pki().other_key);
  EXPECT_EQ(ec.category(), tls::openssl_category()) << describe(ec);
  EXPECT_EQ(ec.message(), "key values mismatch");
  EXPECT_OK(c.use_private_key_file(pki().server_key));
}

TEST(tls_context, a_missing_file_is_the_systems_error) {
  tls::context c(tls::role::server);
  EXPECT_EC(c.use_certificate_chain_file("/nonexistent/cert.pem"), std::errc::no_such_file_or_directory);
  EXPECT_EC(c.use_private_key_file("/nonexistent/key.pem"), std::errc::no_such_file_or_directory);
  tls::context client(tls::role::client);
  EXPECT_TRUE(client.load_verify_file("/nonexistent/ca.pem"));
}

TEST(tls_context, text_that_is_not_pem_is_refused_with_openssls_reason) {
  tls::context c(tls::role::server);
  std::error_code ec = c.use_certificate_chain("not a certificate");
  EXPECT_EQ(ec.category(), tls::openssl_category()) << describe(ec);
  EXPECT_EQ(ec.message(), "no start line");
  ec = c.use_private_key("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
  EXPECT_EQ(ec.category(), tls::openssl_category()) << describe(ec);
  EXPECT_FALSE(ec.message().empty());
  EXPECT_TRUE(c.add_certificate_authority(""));
  // Nothing was set by the failures.
  EXPECT_EQ(SSL_CTX_get0_certificate(c.native_handle()), nullptr);
}

TEST(tls_context, an_encrypted_key_is_refused_without_asking_for_a_password) {
  temp_dir dir;
  int status = 0;
  const std::string encrypted = dir.path("encrypted.key");
  run_command("openssl pkey -in " + pki().server_key + " -aes256 -passout pass:secret -out " + encrypted, status);
  ASSERT_EQ(status, 0);
  tls::context c(tls::role::server);
  ASSERT_OK(c.use_certificate_chain_file(pki().server_cert));
  EXPECT_TRUE(c.use_private_key_file(encrypted));
  EXPECT_TRUE(c.use_private_key(read_file(encrypted)));
}

TEST(tls_context, trust_from_memory_and_from_a_directory) {
  tls::context c(tls::role::client);
  EXPECT_EQ(c.get_verify_mode(), tls::verify_mode::peer);
  EXPECT_OK(c.add_certificate_authority(read_file(pki().ca)));
  X509_STORE* store = SSL_CTX_get_cert_store(c.native_handle());
  EXPECT_EQ(sk_X509_OBJECT_num(X509_STORE_get0_objects(store)), 1);

  temp_dir dir;
  int status = 0;
  run_command("cp " + pki().ca + " " + dir.path("ca.pem") + " && openssl rehash " + dir.path(""), status);
  ASSERT_EQ(status, 0);
  tls::context d(tls::role::client);
  EXPECT_OK(d.load_verify_dir(dir.path("")));
  EXPECT_OK(d.use_default_verify_paths());
}

TEST(tls_context, versions_and_cipher_lists) {
  tls::context c(tls::role::client);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(c.native_handle()), TLS1_2_VERSION);
  EXPECT_OK(c.set_min_version(tls::version::tls1_3));
  EXPECT_EQ(SSL_CTX_get_min_proto_version(c.native_handle()), TLS1_3_VERSION);
  EXPECT_OK(c.set_max_version(tls::version::tls1_3));
  EXPECT_OK(c.set_cipher_list("ECDHE+AESGCM"));
  EXPECT_OK(c.set_ciphersuites("TLS_CHACHA20_POLY1305_SHA256"));
  const std::error_code ec = c.set_cipher_list("NO-SUCH-CIPHER");
  EXPECT_EQ(ec.category(), tls::openssl_category()) << describe(ec);
  EXPECT_EQ(ec.message(), "no cipher match");
  EXPECT_TRUE(c.set_ciphersuites("TLS_NO_SUCH_SUITE"));
}

TEST(tls_context, alpn_names_must_be_1_to_255_bytes) {
  tls::context c(tls::role::client);
  EXPECT_OK(c.set_alpn_protocols({"h2", "http/1.1"}));
  EXPECT_EC(c.set_alpn_protocols({"h2", ""}), std::errc::invalid_argument);
  const std::string long_name(256, 'a');
  EXPECT_EC(c.set_alpn_protocols({std::string_view(long_name)}), std::errc::invalid_argument);
}

TEST(tls_context, server_names_only_between_server_contexts) {
  tls::context server(tls::role::server);
  tls::context other(tls::role::server);
  tls::context client(tls::role::client);
  EXPECT_OK(server.add_server_name("example.test", other));
  EXPECT_EC(server.add_server_name("example.test", client), std::errc::invalid_argument);
  EXPECT_EC(client.add_server_name("example.test", other), std::errc::invalid_argument);
  EXPECT_EC(server.add_server_name("", other), std::errc::invalid_argument);
}

TEST(tls_context, copies_share_one_configuration) {
  tls::context a(tls::role::client);
  tls::context b = a;
  EXPECT_EQ(a.native_handle(), b.native_handle());
  b.set_verify_mode(tls::verify_mode::none);
  EXPECT_EQ(a.get_verify_mode(), tls::verify_mode::none);
}

TEST(tls_errors, each_category_speaks_its_own_words) {
  std::error_code truncated = tls::error::truncated;
  EXPECT_EQ(std::string(truncated.category().name()), "tern.tls");
  EXPECT_NE(truncated.message().find("close_notify"), std::string::npos);
  EXPECT_NE(truncated, tern::error::eof);
  std::error_code verify(X509_V_ERR_HOSTNAME_MISMATCH, tls::verify_category());
  EXPECT_EQ(verify.message(), "hostname mismatch");
  EXPECT_EQ(std::string(verify.category().name()), "tern.tls.verify");
  std::error_code openssl(static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER)),
                          tls::openssl_category());
  EXPECT_EQ(openssl.message(), "wrong version number");
  EXPECT_EQ(std::string(openssl.category().name()), "tern.tls.openssl");
  // A connection cut without close_notify is still the end of the stream, in the words every library shares.
  EXPECT_TRUE(truncated == tern::condition::end_of_stream);
  EXPECT_FALSE(std::error_code(tls::error::no_session) == tern::condition::end_of_stream);
  EXPECT_FALSE(verify == tern::condition::end_of_stream);
  EXPECT_FALSE(openssl == tern::condition::end_of_stream);
}

}  // namespace
