// Tests of the webhook's pure core: AdmissionReview fixtures in, exact JSON patches and
// warnings out; then the patch applied to the pod and reviewed again (idempotence).
#include "proxy/inject/patch.hpp"

#include "proxy/inject/base64.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

namespace claimguard::inject {
namespace {

using json = nlohmann::json;

std::string read_fixture(const std::string& file) {
    std::ifstream in(std::string(CLAIMGUARD_INJECT_FIXTURES) + "/" + file, std::ios::binary);
    EXPECT_TRUE(in) << "missing fixture " << file;
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// The configuration every fixture was derived with (see fixtures/make_fixtures.py).
injection_config test_config(unsigned minor, bool with_defaults) {
    injection_config c;
    c.image = "registry.example/claimguard:0.1.0";
    c.cluster_version = {1, minor};
    c.excluded_namespaces = {"kube-system", "claimguard-system"};
    if (with_defaults) {
        c.default_backend = "mysql.db.svc:3306";
        c.default_rules_configmap = "claimguard-rules";
    }
    return c;
}

struct fixture_case {
    const char* name;  // fixtures/<name>.review.json and fixtures/<name>.expected.json
    unsigned minor;    // the cluster's Kubernetes 1.<minor>
    opt_in source;
    bool with_defaults;
};

void PrintTo(const fixture_case& c, std::ostream* os) { *os << c.name; }

const fixture_case fixture_cases[] = {
    {"opt_in_native", 29, opt_in::pod_annotation, false},
    {"opt_in_plain", 28, opt_in::pod_annotation, false},
    {"existing_init_and_volumes", 30, opt_in::pod_annotation, false},
    {"namespace_label_defaults", 29, opt_in::namespace_label, true},
    {"not_opted_in", 29, opt_in::pod_annotation, true},
    {"opt_out", 29, opt_in::namespace_label, true},
    {"already_injected", 29, opt_in::pod_annotation, false},
    {"kube_system", 29, opt_in::pod_annotation, false},
    {"missing_rules_configmap", 29, opt_in::pod_annotation, false},
    {"injector_pod", 29, opt_in::namespace_label, true},
    {"bad_backend", 29, opt_in::pod_annotation, false},
    {"port_conflict", 29, opt_in::pod_annotation, false},
    {"update_ignored", 29, opt_in::pod_annotation, false},
    {"plain_job_warning", 28, opt_in::pod_annotation, false},
    {"bad_inject_value", 29, opt_in::pod_annotation, false},
    {"long_utf8_value", 29, opt_in::pod_annotation, false},
    {"own_namespace", 29, opt_in::namespace_label, true},
    {"host_network", 29, opt_in::pod_annotation, false},
    {"manual_sidecar", 29, opt_in::pod_annotation, false},
    {"null_annotations_defaults", 29, opt_in::namespace_label, true},
};

class review_fixtures : public testing::TestWithParam<fixture_case> {};

TEST_P(review_fixtures, answer_matches_the_expected_patch_and_warnings) {
    const fixture_case& c = GetParam();
    const std::string body = read_fixture(std::string(c.name) + ".review.json");
    const json request = json::parse(body);
    const json expected = json::parse(read_fixture(std::string(c.name) + ".expected.json"));
    const injection_config config = test_config(c.minor, c.with_defaults);

    auto outcome = review(body, config, c.source);
    ASSERT_TRUE(outcome) << outcome.error().message();
    const json answer = json::parse(outcome->response);
    EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(answer["kind"], "AdmissionReview");
    const json& response = answer["response"];
    EXPECT_EQ(response["uid"], request["request"]["uid"]);
    EXPECT_EQ(response["allowed"], expected["allowed"]);
    EXPECT_FALSE(response.contains("status")) << "a mutating webhook that admits says nothing else";

    if (expected["patch"].is_null()) {
        EXPECT_FALSE(response.contains("patch"));
        EXPECT_FALSE(response.contains("patchType"));
        EXPECT_FALSE(outcome->plan.inject);
    } else {
        ASSERT_TRUE(response.contains("patch"));
        EXPECT_EQ(response["patchType"], "JSONPatch");
        auto decoded = base64_decode(response["patch"].get<std::string>());
        ASSERT_TRUE(decoded) << "the patch is not valid base64";
        const json patch = json::parse(*decoded);
        EXPECT_EQ(patch, expected["patch"]) << "got:\n"
                                            << patch.dump(2) << "\nexpected:\n"
                                            << expected["patch"].dump(2);
    }
    const json warnings = response.contains("warnings") ? response["warnings"] : json::array();
    EXPECT_EQ(warnings, expected["warnings"]);
}

// Applying the patch (RFC 6902, nlohmann's implementation) must work on the very pod, change
// nothing of the app, and a second review of the result must be a no-op.
TEST_P(review_fixtures, patched_pod_is_valid_and_a_second_review_is_empty) {
    const fixture_case& c = GetParam();
    const json request = json::parse(read_fixture(std::string(c.name) + ".review.json"));
    const injection_config config = test_config(c.minor, c.with_defaults);
    const json& pod = request["request"]["object"];
    if (!pod.is_object()) GTEST_SKIP() << "no pod in this review";
    const injection_plan plan =
        plan_injection(pod, request["request"]["namespace"].get<std::string>(), config, c.source);
    if (!plan.inject) {
        EXPECT_TRUE(plan.patch.empty());
        return;
    }
    json patched;
    ASSERT_NO_THROW(patched = pod.patch(plan.patch));

    // The app's containers are untouched, or only followed by the sidecar.
    const json& app_before = pod["spec"]["containers"];
    const json& app_after = patched["spec"]["containers"];
    for (std::size_t i = 0; i < app_before.size(); ++i) EXPECT_EQ(app_after[i], app_before[i]);
    const json* sidecar = nullptr;
    if (plan.native) {
        EXPECT_EQ(app_after.size(), app_before.size());
        sidecar = &patched["spec"]["initContainers"][0];
        EXPECT_EQ((*sidecar)["restartPolicy"], "Always");
        const json& init_before = pod["spec"].value("initContainers", json::array());
        for (std::size_t i = 0; i < init_before.size(); ++i)
            EXPECT_EQ(patched["spec"]["initContainers"][i + 1], init_before[i]);
    } else {
        ASSERT_EQ(app_after.size(), app_before.size() + 1);
        sidecar = &app_after.back();
        EXPECT_TRUE(sidecar->contains("lifecycle"));
    }
    EXPECT_EQ((*sidecar)["name"], "claimguard");
    EXPECT_EQ((*sidecar)["securityContext"]["readOnlyRootFilesystem"], true);
    EXPECT_EQ(patched["spec"]["volumes"].back()["name"], "claimguard-rules");
    EXPECT_EQ(patched["metadata"]["annotations"]["claimguard.io/status"], "injected");
    // Every annotation the pod had is still there.
    if (pod["metadata"].contains("annotations") && pod["metadata"]["annotations"].is_object()) {
        for (const auto& [key, value] : pod["metadata"]["annotations"].items())
            EXPECT_EQ(patched["metadata"]["annotations"][key], value) << key;
    }

    const injection_plan again =
        plan_injection(patched, request["request"]["namespace"].get<std::string>(), config, c.source);
    EXPECT_FALSE(again.inject);
    EXPECT_TRUE(again.patch.empty());
    EXPECT_TRUE(again.warnings.empty());
    EXPECT_EQ(again.reason, "already injected");
}

INSTANTIATE_TEST_SUITE_P(fixtures, review_fixtures, testing::ValuesIn(fixture_cases),
                         [](const auto& info) { return std::string(info.param.name); });

struct bad_body_case {
    const char* name;
    std::string body;
    errc expected;
};

void PrintTo(const bad_body_case& c, std::ostream* os) { *os << c.name; }

const bad_body_case bad_bodies[] = {
    {"empty", "", errc::not_json},
    {"not_json", "apiVersion: admission.k8s.io/v1", errc::not_json},
    {"truncated", R"({"kind":"AdmissionReview","request":{"uid":"x")", errc::not_json},
    {"array", "[]", errc::not_admission_review},
    {"wrong_kind", R"({"kind":"ConversionReview","request":{"uid":"x"}})", errc::not_admission_review},
    {"no_request", R"({"kind":"AdmissionReview"})", errc::not_admission_review},
    {"request_not_object", R"({"kind":"AdmissionReview","request":"x"})", errc::not_admission_review},
    {"no_uid", R"({"kind":"AdmissionReview","request":{"kind":{"kind":"Pod"}}})", errc::missing_uid},
    {"uid_not_string", R"({"kind":"AdmissionReview","request":{"uid":7}})", errc::missing_uid},
    {"pod_not_object",
     R"({"kind":"AdmissionReview","request":{"uid":"x","kind":{"kind":"Pod"},"operation":"CREATE","object":"pod"}})",
     errc::bad_object},
    {"too_deep", std::string(max_json_depth + 1, '[') + std::string(max_json_depth + 1, ']'), errc::too_deep},
    {"invalid_utf8", "{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\xff\"}}", errc::not_json},
};

class review_bad_body : public testing::TestWithParam<bad_body_case> {};

TEST_P(review_bad_body, is_an_error_not_an_answer) {
    auto outcome = review(GetParam().body, test_config(29, false), opt_in::pod_annotation);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error(), make_error_code(GetParam().expected)) << outcome.error().message();
}

INSTANTIATE_TEST_SUITE_P(bodies, review_bad_body, testing::ValuesIn(bad_bodies),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(review, echoes_a_v1beta1_api_version_and_the_uid) {
    const std::string body = R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",
        "request":{"uid":"u-1","kind":{"kind":"Pod"},"operation":"DELETE","namespace":"shop"}})";
    auto outcome = review(body, test_config(29, false), opt_in::pod_annotation);
    ASSERT_TRUE(outcome);
    const json answer = json::parse(outcome->response);
    EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1beta1");
    EXPECT_EQ(answer["response"], (json{{"uid", "u-1"}, {"allowed", true}}));
}

TEST(review, subresource_creates_are_not_pods) {
    // A pods/binding or pods/eviction CREATE carries another object: never patched.
    const std::string body = R"({"kind":"AdmissionReview","request":{"uid":"u-2","kind":{"kind":"Pod"},
        "operation":"CREATE","subResource":"binding","namespace":"shop",
        "object":{"metadata":{"annotations":{"claimguard.io/inject":"true"}}}}})";
    auto outcome = review(body, test_config(29, true), opt_in::namespace_label);
    ASSERT_TRUE(outcome);
    EXPECT_FALSE(outcome->plan.inject);
}

TEST(review, names_the_pod_for_the_log) {
    const std::string named = R"({"kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},
        "operation":"CREATE","namespace":"shop","object":{"metadata":{"name":"api-0"},"spec":{"containers":[]}}}})";
    const std::string generated = R"({"kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},
        "operation":"CREATE","namespace":"shop","object":{"metadata":{"generateName":"api-"},"spec":{"containers":[]}}}})";
    EXPECT_EQ(review(named, test_config(29, false), opt_in::pod_annotation)->pod, "shop/api-0");
    EXPECT_EQ(review(generated, test_config(29, false), opt_in::pod_annotation)->pod, "shop/api-*");
}

TEST(plan_injection, a_pod_without_metadata_gets_the_status_in_a_new_metadata) {
    const json pod = {{"spec", {{"containers", json::array({{{"name", "app"}, {"image", "app:1"}}})}}}};
    const injection_plan plan = plan_injection(pod, "shop", test_config(29, true), opt_in::namespace_label);
    ASSERT_TRUE(plan.inject);
    const json patched = pod.patch(plan.patch);
    EXPECT_EQ(patched["metadata"], (json{{"annotations", {{"claimguard.io/status", "injected"}}}}));
}

TEST(plan_injection, a_pod_without_containers_is_refused) {
    const json pod = {{"metadata", {{"annotations", {{"claimguard.io/inject", "true"}}}}}, {"spec", json::object()}};
    const injection_plan plan = plan_injection(pod, "shop", test_config(29, true), opt_in::pod_annotation);
    EXPECT_FALSE(plan.inject);
    EXPECT_EQ(plan.warnings, std::vector<std::string>{"claimguard: not injected: the pod has no containers"});
}

TEST(plan_injection, annotation_beats_the_default) {
    json pod = json::parse(read_fixture("namespace_label_defaults.review.json"))["request"]["object"];
    pod["metadata"]["annotations"] = {{"claimguard.io/backend", "orders-db:3307"},
                                      {"claimguard.io/rules-configmap", "orders-rules"}};
    const injection_plan plan = plan_injection(pod, "shop", test_config(29, true), opt_in::namespace_label);
    ASSERT_TRUE(plan.inject);
    const json patched = pod.patch(plan.patch);
    const json& args = patched["spec"]["initContainers"][0]["args"];
    EXPECT_EQ(args[4], "orders-db:3307");
    EXPECT_EQ(patched["spec"]["volumes"].back()["configMap"]["name"], "orders-rules");
}

TEST(json_depth, counts_brackets_outside_strings_only) {
    EXPECT_EQ(json_depth(R"({"a":[{"b":1}]})", 100), 3u);
    EXPECT_EQ(json_depth(R"({"a":"[[[[{{{{"})", 100), 1u);
    EXPECT_EQ(json_depth(R"({"a":"\"[[[["})", 100), 1u);
    EXPECT_EQ(json_depth("", 100), 0u);
    // Stops counting past the limit.
    EXPECT_EQ(json_depth(std::string(1000, '['), 10), 11u);
}

}  // namespace
}  // namespace claimguard::inject
