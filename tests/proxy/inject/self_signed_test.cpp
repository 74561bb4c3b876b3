// Tests of the self-signed certificates: the serving certificate verifies against the CA for
// every service name, and only for those, with the extensions the API server requires.
#include "proxy/inject/self_signed.hpp"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace claimguard::inject {
namespace {

struct x509_free_t {
    void operator()(X509* p) const noexcept { X509_free(p); }
};
using x509_ptr = std::unique_ptr<X509, x509_free_t>;

x509_ptr parse_pem(const std::string& pem) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
    return x509_ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// X509_verify_cert of `leaf` against `ca` as the only trust anchor; returns the error code.
int verify(X509* ca, X509* leaf) {
    std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
    X509_STORE_add_cert(store.get(), ca);
    std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), &X509_STORE_CTX_free);
    X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
    X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
    X509_verify_cert(ctx.get());
    return X509_STORE_CTX_get_error(ctx.get());
}

TEST(self_signed, serving_certificate_verifies_against_its_ca_for_each_name) {
    const auto names = service_dns_names("claimguard-inject", "claimguard-system");
    const tls_material m = generate_self_signed(names);
    const x509_ptr ca = parse_pem(m.ca_pem);
    const x509_ptr leaf = parse_pem(m.cert_chain_pem);
    ASSERT_TRUE(ca && leaf);
    EXPECT_EQ(verify(ca.get(), leaf.get()), X509_V_OK);
    for (const auto& name : names)
        EXPECT_EQ(X509_check_host(leaf.get(), name.c_str(), name.size(), 0, nullptr), 1) << name;
    EXPECT_NE(X509_check_host(leaf.get(), "evil.example", 0, 0, nullptr), 1);
    EXPECT_EQ(X509_check_ca(ca.get()), 1);
    EXPECT_EQ(X509_check_ca(leaf.get()), 0);
    EXPECT_NE(m.key_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST(self_signed, another_ca_does_not_verify_it) {
    const tls_material a = generate_self_signed({"a.example"});
    const tls_material b = generate_self_signed({"a.example"});
    const x509_ptr ca_b = parse_pem(b.ca_pem);
    const x509_ptr leaf_a = parse_pem(a.cert_chain_pem);
    EXPECT_NE(verify(ca_b.get(), leaf_a.get()), X509_V_OK);
    EXPECT_NE(a.ca_pem, b.ca_pem) << "each start-up makes a new CA";
}

TEST(self_signed, validity_starts_in_the_past_and_ends_after_the_requested_time) {
    const tls_material m = generate_self_signed({"a.example"}, std::chrono::hours(48));
    const x509_ptr leaf = parse_pem(m.cert_chain_pem);
    int days = 0, seconds = 0;
    ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notBefore(leaf.get())), 1);
    EXPECT_LT(days * 86400 + seconds, 0) << "notBefore is backdated";
    ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(leaf.get())), 1);
    EXPECT_GT(days * 86400 + seconds, 47 * 3600);
    EXPECT_LE(days * 86400 + seconds, 48 * 3600);
}

TEST(self_signed, refuses_no_names_and_bad_names) {
    EXPECT_THROW((void)generate_self_signed({}), std::invalid_argument);
    EXPECT_THROW((void)generate_self_signed({"a,DNS:evil.example"}), std::invalid_argument);
}

TEST(service_dns_names, are_the_four_names_the_api_server_may_use) {
    EXPECT_EQ(service_dns_names("hook", "ns"),
              (std::vector<std::string>{"hook", "hook.ns", "hook.ns.svc", "hook.ns.svc.cluster.local"}));
}

}  // namespace
}  // namespace claimguard::inject
