// Warnings (not errors) for Redis key templates whose {hash tag} would put claims in one Redis
// Cluster slot: a constant tag (every claim), or a tag of the stock key only (every claim on one
// campaign: a flash sale on one node). Templates without a tag spread over every slot: no warning.
#include <gtest/gtest.h>

#include "load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

struct warning_case {
    const char* name;
    std::string key;                    // the claim rule's redis key template
    std::vector<std::string> warnings;  // "line:column: message"
};

std::vector<std::string> warning_lines(const load_result& r) {
    std::vector<std::string> out;
    for (const auto& w : r.warnings)
        out.push_back(std::to_string(w.pos.line) + ":" + std::to_string(w.pos.column) + ": " + w.message);
    return out;
}

class redis_slot_warnings : public testing::TestWithParam<warning_case> {};

TEST_P(redis_slot_warnings, are_reported) {
    const auto& c = GetParam();
    const auto r = load_one(with_claim_lines("    redis: {key: \"" + c.key + "\"}\n"));
    ASSERT_TRUE(r.rules.has_value()) << (r.errors.empty() ? "" : r.errors.front().message);
    EXPECT_EQ(warning_lines(r), c.warnings);
}

const std::string constant_tag =
    "11:18: redis key's hash tag {locks} is the same for every claim of rule 'c', so on a Redis Cluster every lock "
    "lands in one slot and one node takes all claims; drop the tag (write the key without '{{ }}')";
const std::string campaign_tag =
    "11:18: redis key's hash tag holds only campaign_id, so on a Redis Cluster every claim on one 's' stock row "
    "shares one slot: a flash sale's whole load goes to one node; drop the tag, or tag the user's column instead";

INSTANTIATE_TEST_SUITE_P(
    templates, redis_slot_warnings,
    testing::Values(warning_case{"no_tag_spreads", "lock:coupon:{user_id}:{campaign_id}", {}},
                    warning_case{"user_tag_keeps_a_users_locks_together", "lock:{{{user_id}}}:{campaign_id}", {}},
                    warning_case{"whole_tuple_tag", "lock:{{{user_id}:{campaign_id}}}", {}},
                    warning_case{"constant_tag", "{{locks}}:{user_id}:{campaign_id}", {constant_tag}},
                    warning_case{"campaign_tag", "lock:{{{campaign_id}}}:{user_id}", {campaign_tag}},
                    warning_case{"campaign_tag_with_literal", "lock:{{c{campaign_id}}}:{user_id}", {campaign_tag}},
                    warning_case{"empty_tag_is_no_tag", "lock:{{}}:{user_id}:{campaign_id}", {}},
                    warning_case{"unclosed_tag_is_no_tag", "lock:{{{campaign_id}:{user_id}", {}},
                    warning_case{"first_tag_counts", "lock:{{{user_id}}}{{{campaign_id}}}", {}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(redis_slot_warnings, are_formatted_like_errors) {
    EXPECT_EQ(format_warning({{"r.yaml", 3, 9}, "m"}), "r.yaml:3:9: warning: m");
}

}  // namespace
}  // namespace claimguard::rules::test
