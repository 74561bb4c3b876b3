// The structured fields of JSON log lines (issue 22), read from the messages' wording.
#include "proxy/session/logging.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace claimguard::session {
namespace {

using json = nlohmann::json;

TEST(log_fields, session_peer_and_rule) {
    const json f =
        structured_fields("session 42 from 10.0.0.7:51234: cannot connect to the database at db:3306: refused");
    EXPECT_EQ(f, (json{{"component", "session"}, {"session", 42}, {"peer", "10.0.0.7:51234"}})) << f.dump();
    const json g = structured_fields("session 7: rule coupon_stock: a give-back changed no row");
    EXPECT_EQ(g, (json{{"component", "session"}, {"session", 7}, {"rule", "coupon_stock"}})) << g.dump();
}

TEST(log_fields, rules_version_and_schema_check) {
    const json f = structured_fields("rules reload: 1 stock rules, 1 claim rules (version 3f2a9c)");
    EXPECT_EQ(f, (json{{"component", "rules"}, {"version", "3f2a9c"}})) << f.dump();
    const json g = structured_fields("schema check: rule coupon_stock key column campaign_id (utf8mb4): keys compare");
    EXPECT_EQ(g.value("component", ""), "schema_check");
    EXPECT_EQ(g.value("rule", ""), "coupon_stock");
}

TEST(log_fields, injector_pod_and_action) {
    EXPECT_EQ(structured_fields("inject: shop/api-0: not injected: no backend"),
              (json{{"component", "inject"}, {"pod", "shop/api-0"}, {"action", "not_injected"}}));
    EXPECT_EQ(structured_fields("inject: shop/api-*: injected (native sidecar, rules ConfigMap r, backend db:3306)"),
              (json{{"component", "inject"}, {"pod", "shop/api-*"}, {"action", "injected"}}));
}

TEST(log_fields, nothing_invented) {
    EXPECT_EQ(structured_fields("claimguard stopped"), json::object());
    // "sessions" and "ruler" are not the keys; "session abc" is no number.
    EXPECT_EQ(structured_fields("all sessions closed; the ruler session abc"), (json{{"component", "shutdown"}}));
}

}  // namespace
}  // namespace claimguard::session
