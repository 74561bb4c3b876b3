// The webhook's pure core: AdmissionReview JSON in, AdmissionReview response with a base64
// JSONPatch out. Decides whether a pod gets the claimguard sidecar and builds the patch.
#pragma once

#include "proxy/inject/errors.hpp"
#include "proxy/inject/injection_config.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::inject {

// Deeper JSON is refused before parsing; real pods nest about 20 levels (managedFields).
inline constexpr std::size_t max_json_depth = 128;
// A warning quotes at most this much of an annotation value (the API server shows warnings to
// kubectl users and truncates long ones).
inline constexpr std::size_t max_warning_value_chars = 40;

// Which MutatingWebhookConfiguration entry sent the review. The webhook cannot see namespace
// labels, so the entry whose namespaceSelector matches claimguard.io/inject=enabled calls
// `/mutate/namespace`; there every pod is injected unless it opts out.
enum class opt_in {
    pod_annotation,   // inject only pods annotated claimguard.io/inject: "true"
    namespace_label,  // inject every pod not annotated claimguard.io/inject: "false"
};

struct injection_plan {
    bool inject = false;
    bool native = false;                             // meaningful when inject
    nlohmann::json patch = nlohmann::json::array();  // RFC 6902 operations; empty unless inject
    std::vector<std::string> warnings;               // returned to the client (kubectl prints them)
    std::string reason;                              // one line for the webhook's log
};

// Decides for one pod `object` created in namespace `ns`. Never fails: a pod the injector
// cannot handle is admitted unchanged, with a warning when the user asked for injection.
[[nodiscard]] injection_plan plan_injection(const nlohmann::json& pod, std::string_view ns,
                                            const injection_config& config, opt_in source);

struct review_outcome {
    std::string response;  // the AdmissionReview response body (JSON)
    injection_plan plan;
    std::string pod;  // "namespace/name" for the log (generateName pods end in '*')
};

// Decodes an AdmissionReview request body and answers it. Errors (not JSON, too deep, no
// request or uid) mean the body is not a review: the server answers HTTP 400.
[[nodiscard]] result<review_outcome> review(std::string_view body, const injection_config& config, opt_in source);

// Nesting depth of a JSON text (brackets outside strings), stopping early past `limit`.
[[nodiscard]] std::size_t json_depth(std::string_view text, std::size_t limit);

}  // namespace claimguard::inject
