// Generates a CA and a serving certificate with OpenSSL 3 (start-up only; throws on failure).
#include "proxy/inject/self_signed.hpp"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>

namespace claimguard::inject {

namespace {

constexpr const char* key_curve = "P-256";
constexpr int serial_bits = 127;  // positive, below the 20-byte limit of RFC 5280
constexpr const char* ca_common_name = "claimguard-inject-ca";
constexpr const char* organization = "claimguard";

template <auto Free>
struct openssl_deleter {
    template <class T>
    void operator()(T* p) const noexcept {
        Free(p);
    }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, openssl_deleter<EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, openssl_deleter<X509_free>>;
using bio_ptr = std::unique_ptr<BIO, openssl_deleter<BIO_free_all>>;
using bn_ptr = std::unique_ptr<BIGNUM, openssl_deleter<BN_free>>;
using ext_ptr = std::unique_ptr<X509_EXTENSION, openssl_deleter<X509_EXTENSION_free>>;

[[noreturn]] void fail(std::string_view step) {
    const unsigned long code = ERR_get_error();
    std::string reason = code != 0 ? ERR_error_string(code, nullptr) : "unknown error";
    ERR_clear_error();
    throw std::runtime_error(fmt::format("self-signed certificate: {}: {}", step, reason));
}

void check(int ok, std::string_view step) {
    if (ok != 1) fail(step);
}

pkey_ptr make_key() {
    pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", key_curve));
    if (!key) fail("generate key");
    return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    ext_ptr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
    if (!ext) fail(fmt::format("extension {}", OBJ_nid2sn(nid)));
    check(X509_add_ext(cert, ext.get(), -1), "add extension");
}

// A certificate for `key` named `common_name`, valid from now - backdate for `validity`,
// not yet signed. `issuer` null: self-issued.
x509_ptr make_certificate(EVP_PKEY* key, const std::string& common_name, std::chrono::seconds validity) {
    x509_ptr cert(X509_new());
    if (!cert) fail("allocate certificate");
    check(X509_set_version(cert.get(), X509_VERSION_3), "set version");
    bn_ptr serial(BN_new());
    if (!serial) fail("allocate serial");
    check(BN_rand(serial.get(), serial_bits, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY), "random serial");
    if (BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) fail("set serial");
    const auto backdate = std::chrono::duration_cast<std::chrono::seconds>(certificate_backdate).count();
    if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -backdate) == nullptr ||
        X509_gmtime_adj(X509_getm_notAfter(cert.get()), validity.count()) == nullptr)
        fail("set validity");
    check(X509_set_pubkey(cert.get(), key), "set public key");
    X509_NAME* name = X509_get_subject_name(cert.get());
    const auto* o = reinterpret_cast<const unsigned char*>(organization);
    const auto* cn = reinterpret_cast<const unsigned char*>(common_name.c_str());
    check(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, o, -1, -1, 0), "set O");
    check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, cn, -1, -1, 0), "set CN");
    return cert;
}

std::string pem_of(X509* cert) {
    bio_ptr bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) fail("write certificate PEM");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return {data, static_cast<std::size_t>(size)};
}

std::string pem_of(EVP_PKEY* key) {
    bio_ptr bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
        fail("write key PEM");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return {data, static_cast<std::size_t>(size)};
}

}  // namespace

tls_material generate_self_signed(const std::vector<std::string>& dns_names, std::chrono::seconds validity) {
    if (dns_names.empty()) throw std::invalid_argument("self-signed certificate: no DNS names");

    const pkey_ptr ca_key = make_key();
    const x509_ptr ca = make_certificate(ca_key.get(), ca_common_name, validity);
    check(X509_set_issuer_name(ca.get(), X509_get_subject_name(ca.get())), "set CA issuer");
    add_extension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
    add_extension(ca.get(), ca.get(), NID_subject_key_identifier, "hash");
    if (X509_sign(ca.get(), ca_key.get(), EVP_sha256()) == 0) fail("sign CA");

    const pkey_ptr key = make_key();
    const x509_ptr cert = make_certificate(key.get(), dns_names.front(), validity);
    check(X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())), "set issuer");
    std::string san;
    for (const auto& name : dns_names) {
        if (name.empty() || name.find_first_of(",:= ") != std::string::npos)
            throw std::invalid_argument(fmt::format("self-signed certificate: bad DNS name \"{}\"", name));
        san += fmt::format("{}DNS:{}", san.empty() ? "" : ",", name);
    }
    add_extension(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth");
    add_extension(cert.get(), ca.get(), NID_subject_alt_name, san);
    add_extension(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always");
    if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) fail("sign serving certificate");

    return {pem_of(ca.get()), pem_of(cert.get()), pem_of(key.get())};
}

std::vector<std::string> service_dns_names(const std::string& service, const std::string& ns) {
    return {service, fmt::format("{}.{}", service, ns), fmt::format("{}.{}.svc", service, ns),
            fmt::format("{}.{}.svc.cluster.local", service, ns)};
}

}  // namespace claimguard::inject
