// Self-signed certificates for the webhook when cert-manager is not used: a throw-away CA and a
// serving certificate for the webhook Service's DNS names, generated with OpenSSL at start-up.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace claimguard::inject {

inline constexpr std::chrono::hours default_self_signed_validity{24 * 365};
// notBefore is set this far in the past, for API servers whose clock runs a little behind.
inline constexpr std::chrono::minutes certificate_backdate{5};

struct tls_material {
    std::string ca_pem;          // the CA certificate: the webhook configuration's caBundle
    std::string cert_chain_pem;  // the serving certificate (signed by the CA)
    std::string key_pem;         // the serving key (PKCS#8)
};

// ECDSA P-256 keys, SHA-256 signatures. The serving certificate has every name as a DNS SAN
// (the API server checks SANs, never the CN) and extendedKeyUsage serverAuth. Throws
// std::runtime_error with OpenSSL's reason when a step fails, std::invalid_argument when
// `dns_names` is empty.
[[nodiscard]] tls_material generate_self_signed(const std::vector<std::string>& dns_names,
                                                std::chrono::seconds validity = default_self_signed_validity);

// The names the API server uses to reach Service `service` in `ns`:
// service, service.ns, service.ns.svc, service.ns.svc.cluster.local.
[[nodiscard]] std::vector<std::string> service_dns_names(const std::string& service, const std::string& ns);

}  // namespace claimguard::inject
