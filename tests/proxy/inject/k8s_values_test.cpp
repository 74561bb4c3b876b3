// Tests of the Kubernetes value parsers: versions, names, host:port, quantities, JSON pointers.
#include "proxy/inject/k8s_values.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace claimguard::inject {
namespace {

struct version_case {
    const char* name;
    const char* text;
    bool ok;
    k8s_version expected;
};

void PrintTo(const version_case& c, std::ostream* os) { *os << c.name; }

const version_case versions[] = {
    {"plain", "1.29", true, {1, 29}},
    {"with_v_and_patch", "v1.29.3", true, {1, 29}},
    {"managed_plus", "1.28+", true, {1, 28}},
    {"gke_suffix", "v1.30.2-gke.1587003", true, {1, 30}},
    {"eks_suffix", "v1.27.16-eks-a18cd3a", true, {1, 27}},
    {"major_only", "1", false, {}},
    {"empty", "", false, {}},
    {"trailing_dot", "1.", false, {}},
    {"letters", "one.two", false, {}},
    {"garbage_after_minor", "1.29x", false, {}},
    {"zero_major", "0.29", false, {}},
    {"huge_component", "1.123456789", false, {}},
};

class version_parse : public testing::TestWithParam<version_case> {};

TEST_P(version_parse, parses_or_refuses) {
    const version_case& c = GetParam();
    auto v = parse_k8s_version(c.text);
    ASSERT_EQ(static_cast<bool>(v), c.ok) << c.text;
    if (c.ok) {
        EXPECT_EQ(v->major, c.expected.major);
        EXPECT_EQ(v->minor, c.expected.minor);
    } else {
        EXPECT_EQ(v.error(), make_error_code(errc::bad_version));
    }
}

INSTANTIATE_TEST_SUITE_P(versions, version_parse, testing::ValuesIn(versions),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(k8s_version, native_sidecars_start_at_1_29) {
    EXPECT_LT((k8s_version{1, 28}), native_sidecar_version);
    EXPECT_GE((k8s_version{1, 29}), native_sidecar_version);
    EXPECT_GE((k8s_version{2, 0}), native_sidecar_version);
}

struct host_port_case {
    const char* name;
    const char* text;
    bool ok;
};

void PrintTo(const host_port_case& c, std::ostream* os) { *os << c.name; }

const host_port_case host_ports[] = {
    {"service_name", "mysql:3306", true},
    {"fqdn", "mysql.shop.svc.cluster.local:3306", true},
    {"ipv4", "10.0.0.12:3306", true},
    {"ipv6", "[fd00::12]:3306", true},
    {"underscore_host", "my_db:3306", true},
    {"max_port", "db:65535", true},
    {"no_port", "mysql", false},
    {"empty_port", "mysql:", false},
    {"port_zero", "mysql:0", false},
    {"port_too_big", "mysql:65536", false},
    {"port_not_numeric", "mysql:http", false},
    {"no_host", ":3306", false},
    {"ipv6_without_brackets", "fd00::12:3306", false},
    {"space", "my sql:3306", false},
    {"empty_label", "mysql..svc:3306", false},
    {"leading_dash", "-mysql:3306", false},
    {"unclosed_bracket", "[fd00::12:3306", false},
    {"flag_injection", "--rules=x:3306", false},
};

class host_port_validate : public testing::TestWithParam<host_port_case> {};

TEST_P(host_port_validate, accepts_or_refuses) {
    const host_port_case& c = GetParam();
    auto r = validate_host_port(c.text);
    EXPECT_EQ(static_cast<bool>(r), c.ok) << c.text;
    if (!c.ok && !r) {
        EXPECT_EQ(r.error(), make_error_code(errc::bad_host_port));
    }
}

INSTANTIATE_TEST_SUITE_P(host_ports, host_port_validate, testing::ValuesIn(host_ports),
                         [](const auto& info) { return std::string(info.param.name); });

struct name_case {
    const char* name;
    std::string text;
    bool subdomain;
    bool label;
};

void PrintTo(const name_case& c, std::ostream* os) { *os << c.name; }

const name_case names[] = {
    {"simple", "coupon-rules", true, true},
    {"dotted", "coupon.rules.v2", true, false},
    {"digits", "123", true, true},
    {"upper_case", "Coupon", false, false},
    {"underscore", "coupon_rules", false, false},
    {"leading_dash", "-rules", false, false},
    {"trailing_dot", "rules.", false, false},
    {"empty", "", false, false},
    {"label_at_63", std::string(63, 'a'), true, true},
    {"label_at_64", std::string(64, 'a'), true, false},
    {"subdomain_at_253", std::string(253, 'a'), true, false},
    {"subdomain_at_254", std::string(254, 'a'), false, false},
};

class dns_names : public testing::TestWithParam<name_case> {};

TEST_P(dns_names, follow_rfc_1123) {
    const name_case& c = GetParam();
    EXPECT_EQ(is_dns_subdomain(c.text), c.subdomain);
    EXPECT_EQ(is_dns_label(c.text), c.label);
}

INSTANTIATE_TEST_SUITE_P(names, dns_names, testing::ValuesIn(names),
                         [](const auto& info) { return std::string(info.param.name); });

struct quantity_case {
    const char* name;
    const char* text;
    bool ok;
};

void PrintTo(const quantity_case& c, std::ostream* os) { *os << c.name; }

const quantity_case quantities[] = {
    {"millicores", "50m", true},         {"cores", "2", true},      {"fraction", "0.5", true},
    {"mebibytes", "64Mi", true},         {"gigabytes", "1G", true}, {"exponent", "1e3", true},
    {"negative_exp", "5E-3", true},      {"empty", "", false},      {"unit_only", "Mi", false},
    {"bad_unit", "64MB", false},         {"negative", "-1", false}, {"space", "64 Mi", false},
    {"exponent_no_digits", "1e", false},
};

class quantity_check : public testing::TestWithParam<quantity_case> {};

TEST_P(quantity_check, matches_the_kubernetes_grammar) {
    EXPECT_EQ(is_quantity(GetParam().text), GetParam().ok) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(quantities, quantity_check, testing::ValuesIn(quantities),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(json_pointer_token, escapes_tilde_before_slash) {
    EXPECT_EQ(json_pointer_token("claimguard.io/status"), "claimguard.io~1status");
    EXPECT_EQ(json_pointer_token("a~b"), "a~0b");
    // RFC 6901: "~1" in a key is '~' then '1', so it must become "~01", not "~1" (which is '/').
    EXPECT_EQ(json_pointer_token("~1"), "~01");
    EXPECT_EQ(json_pointer_token("/~/"), "~1~0~1");
    EXPECT_EQ(json_pointer_token("plain"), "plain");
}

}  // namespace
}  // namespace claimguard::inject
