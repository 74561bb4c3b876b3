// Parsers and validators for the Kubernetes values the injector reads or writes: versions,
// host:port annotations, object names, resource quantities, JSON-pointer tokens.
#pragma once

#include "proxy/inject/errors.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace claimguard::inject {

struct k8s_version {
    unsigned major = 0;
    unsigned minor = 0;
    friend auto operator<=>(const k8s_version&, const k8s_version&) = default;
};

// Native sidecars (an init container with restartPolicy: Always) are on by default from 1.29.
inline constexpr k8s_version native_sidecar_version{1, 29};

// Accepts what `kubectl version` and the API server report: "1.29", "v1.29.3",
// "1.29+" (GKE, EKS minor), "v1.30.2-gke.1587003". Only major and minor are kept.
[[nodiscard]] result<k8s_version> parse_k8s_version(std::string_view text);

inline constexpr std::size_t max_dns_subdomain_length = 253;
inline constexpr std::size_t max_dns_label_length = 63;

// RFC 1123 subdomain, as Kubernetes checks ConfigMap names: lower-case letters, digits, '-' and
// '.', starting and ending with a letter or digit, at most 253 characters.
[[nodiscard]] bool is_dns_subdomain(std::string_view name);
// RFC 1123 label, as Kubernetes checks namespace names: like a subdomain without '.', at most 63.
[[nodiscard]] bool is_dns_label(std::string_view name);

// "host:port" where host is a DNS name (letters, digits, '-', '.', '_'), an IPv4 address, or a
// bracketed IPv6 literal, and port is 1..65535. What `claimguard serve --backend` accepts.
[[nodiscard]] result<std::string_view> validate_host_port(std::string_view text);

// A Kubernetes resource quantity such as "50m", "64Mi", "1", "0.5", "1e3" (non-negative).
[[nodiscard]] bool is_quantity(std::string_view text);

// One reference token of a JSON pointer (RFC 6901): '~' becomes "~0", '/' becomes "~1".
[[nodiscard]] std::string json_pointer_token(std::string_view key);

}  // namespace claimguard::inject
