// `claimguard lint` and `claimguard ddl`: file reading, output format and exit codes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rules/cli/rules_cli.hpp"
#include "rules/model/ddl.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules_cli {
namespace {

namespace fs = std::filesystem;

const std::string valid_rules =
    "stock_rules:\n  - name: s\n    table: coupon_stock\n    key_columns: campaign_id\n    counter_column: remain\n"
    "claim_rules:\n  - name: c\n    table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
    "    consumes: s\n";

// A scratch directory per test, removed afterwards.
class cli : public testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("claimguard_cli_" + std::to_string(::getpid()) + "_" +
                                            testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string write(const std::string& name, const std::string& text) {
        const auto path = (dir_ / name).string();
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }

    struct run_result {
        int rc;
        std::string out;
        std::string err;
    };

    static run_result run(int (*command)(const std::vector<std::string>&, std::ostream&, std::ostream&),
                          const std::vector<std::string>& paths) {
        std::ostringstream out, err;
        const int rc = command(paths, out, err);
        return {rc, out.str(), err.str()};
    }
    static run_result run_digests(const std::vector<std::string>& digests) {
        std::ostringstream out, err;
        const int rc = suggest({}, digests, out, err);
        return {rc, out.str(), err.str()};
    }

    fs::path dir_;
};

TEST_F(cli, lint_valid_prints_counts_and_version) {
    const auto path = write("rules.yaml", valid_rules);
    const auto r = run(lint, {path});
    const auto expected = rules::load_rules({{path, valid_rules}});
    ASSERT_TRUE(expected.rules);
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "ok: 1 stock rules, 1 claim rules (version " + expected.rules->version_hash + ")\n");
    EXPECT_EQ(r.err, "");
}

TEST_F(cli, lint_says_a_reserve_rule_needs_the_sidecars_account) {
    std::string text = valid_rules;
    const auto at = text.find("claim_rules:");
    ASSERT_NE(at, std::string::npos);
    text.insert(at, "    reserve: {block: 20}\n");
    const auto path = write("rules.yaml", text);
    const auto r = run(lint, {path});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("note: rule s has reserve: the sidecar needs its own database account "
                         "(schema_check_user, with SELECT and UPDATE on coupon_stock); without it reserve is not "
                         "served\n"),
              std::string::npos)
        << r.out;
}

TEST_F(cli, lint_errors_go_to_err_with_file_line_column) {
    const auto path = write("bad.yaml", "default_mode: strict\nfoo: 1\n");
    const auto r = run(lint, {path});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, path + ":1:15: error: default_mode must be enforce or observe, not 'strict'\n" + path +
                         ":2:1: error: unknown field 'foo' in the rules file; its fields are: default_mode, "
                         "stock_rules, claim_rules, trusted_users, rule_modes\n");
}

TEST_F(cli, lint_several_files_form_one_set) {
    const auto a = write("a.yaml", valid_rules);
    const auto b = write("b.yaml", "default_mode: observe\n");
    const auto r = run(lint, {a, b});
    EXPECT_EQ(r.rc, 0);
    EXPECT_TRUE(r.out.starts_with("ok: 1 stock rules, 1 claim rules (version ")) << r.out;
}

TEST_F(cli, lint_missing_file_exits_2) {
    const auto missing = (dir_ / "missing.yaml").string();
    const auto r = run(lint, {missing});
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "claimguard lint: cannot read " + missing + ": No such file or directory\n");
    EXPECT_EQ(r.out, "");
}

TEST_F(cli, lint_unreadable_file_wins_over_rule_errors) {
    const auto bad = write("bad.yaml", "foo: 1\n");
    const auto missing = (dir_ / "missing.yaml").string();
    const auto r = run(lint, {bad, missing});
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "claimguard lint: cannot read " + missing + ": No such file or directory\n");
}

// Issue 22: a directory is what a ConfigMap mount is: its *.yaml and *.yml files, without the
// ..data link and the ..<timestamp> directory, nor other hidden or foreign files.
TEST_F(cli, lint_a_configmap_directory) {
    const auto example = std::filesystem::path(CLAIMGUARD_SOURCE_DIR) / "rules/examples/coupon.yaml";
    const auto mount = dir_ / "configmap";
    const auto stamp = mount / "..2024_01_01_00_00_00.1";
    std::filesystem::create_directories(stamp);
    std::filesystem::copy_file(example, stamp / "coupon.yaml");
    std::ofstream(stamp / "broken.txt") << "not: [rules\n";
    std::filesystem::create_directory_symlink(stamp.filename(), mount / "..data");
    std::filesystem::create_symlink("..data/coupon.yaml", mount / "coupon.yaml");
    std::ofstream(mount / ".coupon.yaml.swp") << "garbage: [\n";
    std::ofstream(mount / "README") << "not rules\n";
    const auto r = run(lint, {mount.string()});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out.rfind("ok: ", 0), 0u) << r.out;
    EXPECT_EQ(r.err, "");
}

TEST_F(cli, lint_a_directory_reports_errors_with_file_names) {
    const auto d = dir_ / "rules.d";
    std::filesystem::create_directories(d);
    std::ofstream(d / "b.yml") << "foo: 1\n";
    const auto r = run(lint, {d.string()});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find((d / "b.yml").string() + ":1:1:"), std::string::npos) << r.err;
}

TEST_F(cli, lint_an_empty_directory_exits_2) {
    const auto d = dir_ / "empty";
    std::filesystem::create_directories(d);
    std::ofstream(d / "notes.txt") << "x\n";
    const auto r = run(lint, {d.string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "claimguard lint: no rules files (*.yaml, *.yml) in the directory " + d.string() + "\n");
}

TEST_F(cli, lint_without_files_exits_2) {
    const auto r = run(lint, {});
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "claimguard lint: no rules files given (usage: claimguard lint RULES.yaml...)\n");
}

TEST_F(cli, lint_oversized_file_is_a_rules_error) {
    const auto path = write("big.yaml", std::string(rules::max_rules_file_bytes + 100, '#'));
    const auto r = run(lint, {path});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, path + ":1:1: error: the file is larger than 1048576 bytes, the most a rules file may hold\n");
}

TEST_F(cli, ddl_prints_the_generated_script) {
    const auto path = write("rules.yaml", valid_rules);
    const auto r = run(ddl, {path});
    const auto expected = rules::load_rules({{path, valid_rules}});
    ASSERT_TRUE(expected.rules);
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, rules::render_ddl(*expected.rules));
    EXPECT_NE(r.out.find("ALTER TABLE `coupon_order` ADD UNIQUE INDEX"), std::string::npos);
    EXPECT_EQ(r.err, "");
}

TEST_F(cli, ddl_refuses_invalid_rules) {
    const auto path = write("bad.yaml", "claim_rules: x\n");
    const auto r = run(ddl, {path});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, path +
                         ":1:14: error: claim_rules must be a list of claim rules, each starting with '- ', not "
                         "a single value\n");
}

TEST_F(cli, ddl_missing_file_exits_2) {
    const auto r = run(ddl, {(dir_ / "nope.yaml").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_TRUE(r.err.starts_with("claimguard ddl: cannot read ")) << r.err;
}

TEST_F(cli, ddl_of_the_example_matches_the_checked_in_migration) {
    // What `claimguard ddl rules/examples/coupon.yaml` prints from the repository root.
    const auto cwd = fs::current_path();
    fs::current_path(CLAIMGUARD_SOURCE_DIR);
    const auto r = run(ddl, {"rules/examples/coupon.yaml"});
    fs::current_path(cwd);
    std::ifstream in(std::string(CLAIMGUARD_SOURCE_DIR) + "/sql/migrations/001_claimguard_unique_index.sql");
    std::stringstream migration;
    migration << in.rdbuf();
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, migration.str());
}

// A MariaDB general log of the incident's flow on three connections (one statement over two lines,
// a user id equal to the campaign id on one of them: the mapping goes by votes).
const std::string incident_general_log =
    "/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-0+deb12u1-log (Debian 12). started with:\n"
    "Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
    "Time\t\t    Id Command\tArgument\n"
    "241204 12:30:01\t     5 Connect\tapp@localhost on shop using TCP/IP\n"
    "\t\t     5 Query\tSELECT remain FROM coupon_stock WHERE campaign_id = 7\n"
    "\t\t     6 Query\tSELECT remain FROM coupon_stock WHERE campaign_id = 7\n"
    "\t\t     5 Query\tUPDATE coupon_stock SET remain = 99, version = version + 1 WHERE campaign_id = 7\n"
    "\t\t     6 Query\tUPDATE coupon_stock SET remain = 98, version = version + 1 WHERE campaign_id = 7\n"
    "\t\t     5 Query\tINSERT INTO coupon_order (user_id, campaign_id, created_at)\n"
    "VALUES (42, 7, NOW())\n"
    "241204 12:30:02\t     6 Query\tINSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (7, 7, NOW())\n"
    "\t\t     7 Query\tSELECT remain FROM coupon_stock WHERE campaign_id = 8\n"
    "\t\t     7 Query\tUPDATE coupon_stock SET remain = 3, version = version + 1 WHERE campaign_id = 8\n"
    "\t\t     7 Query\tINSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (8, 8, NOW())\n"
    "\t\t     5 Quit\t\n";

TEST_F(cli, suggest_drafts_the_incidents_rules_from_a_general_log_and_the_draft_lints) {
    const auto r = run(suggest, {write("general.log", incident_general_log)});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto loaded = rules::load_rules({{"draft.yaml", r.out}});
    ASSERT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : rules::format_diagnostic(loaded.errors[0])) << r.out;
    const auto& set = *loaded.rules;
    EXPECT_EQ(set.default_mode, rules::mode::observe);
    ASSERT_EQ(set.stocks.size(), 1u) << r.out;
    EXPECT_EQ(set.stocks[0].table.name, "coupon_stock");
    EXPECT_EQ(set.stocks[0].key_columns, std::vector<std::string>{"campaign_id"});
    EXPECT_EQ(set.stocks[0].counter_column, "remain");
    EXPECT_EQ(set.stocks[0].version_column, std::optional<std::string>("version"));
    ASSERT_EQ(set.claims.size(), 1u) << r.out;
    EXPECT_EQ(set.claims[0].table.name, "coupon_order");
    EXPECT_EQ(set.claims[0].idempotency_columns, (std::vector<std::string>{"user_id", "campaign_id"}));
    EXPECT_EQ(set.claims[0].stock_key_mapping,
              (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
    EXPECT_NE(r.out.find("# coupon_stock: 3 write(s) with a WHERE of equalities; 1 lowered remain (the counter), 3 "
                         "wrote a column the same connection had just read"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("held the value of coupon_stock.campaign_id in 3 of 3 INSERT(s)"), std::string::npos)
        << r.out;
}

TEST_F(cli, suggest_reads_a_script_with_relative_decrements_and_other_names) {
    const auto script = write("app.sql",
                              "UPDATE shop.sku_stock SET qty = qty - 2 WHERE sku = 'A-1' AND warehouse = 3;\n"
                              "INSERT INTO shop.sku_order (buyer, item, wh, note) VALUES ('u1', 'A-1', 3, NULL);\n"
                              "UPDATE shop.sku_stock SET qty = qty - 2 WHERE sku = 'B-7' AND warehouse = 1;\n"
                              "INSERT INTO shop.sku_order (buyer, item, wh, note) VALUES ('u2', 'B-7', 1, 'gift');\n");
    const auto r = run(suggest, {script});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto loaded = rules::load_rules({{"draft.yaml", r.out}});
    ASSERT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : rules::format_diagnostic(loaded.errors[0])) << r.out;
    ASSERT_EQ(loaded.rules->stocks.size(), 1u) << r.out;
    const auto& stock = loaded.rules->stocks[0];
    EXPECT_EQ(stock.table.schema, "shop");
    EXPECT_EQ(stock.key_columns, (std::vector<std::string>{"sku", "warehouse"}));
    EXPECT_EQ(stock.counter_column, "qty");
    EXPECT_EQ(stock.units, 2);
    ASSERT_EQ(loaded.rules->claims.size(), 1u) << r.out;
    EXPECT_EQ(loaded.rules->claims[0].stock_key_mapping,
              (std::vector<std::pair<std::string, std::string>>{{"item", "sku"}, {"wh", "warehouse"}}));
}

TEST_F(cli, suggest_finds_the_counter_among_a_full_row_save_and_an_optimistic_lock) {
    // Hibernate @Version (the version set and compared) and Django's save() (every column written).
    const auto script = write("orm.sql",
                              "select s.campaign_id, s.name, s.remain, s.version from coupon_stock s where "
                              "s.campaign_id=1;\n"
                              "update coupon_stock set name='Sale', remain=99, version=4 where campaign_id=1 and "
                              "version=3;\n"
                              "insert into coupon_order (user_id, campaign_id, created_at) values (10, 1, "
                              "'2026-12-04 13:38:07.639');\n"
                              "select * from coupon_stock where campaign_id=1;\n"
                              "update coupon_stock set name='Sale', remain=98, version=5 where campaign_id=1 and "
                              "version=4;\n"
                              "insert into coupon_order (user_id, campaign_id) values (11, 1);\n"
                              "SELECT `profile`.`id`, `profile`.`nick` FROM `profile` WHERE `profile`.`id` = 10;\n"
                              "UPDATE `profile` SET `nick` = 'bob' WHERE `profile`.`id` = 10;\n");
    const auto r = run(suggest, {script});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto loaded = rules::load_rules({{"draft.yaml", r.out}});
    ASSERT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : rules::format_diagnostic(loaded.errors[0])) << r.out;
    ASSERT_EQ(loaded.rules->stocks.size(), 1u) << r.out;
    const auto& stock = loaded.rules->stocks[0];
    EXPECT_EQ(stock.key_columns, std::vector<std::string>{"campaign_id"}) << r.out;
    EXPECT_EQ(stock.counter_column, "remain") << r.out;
    EXPECT_EQ(stock.version_column, std::optional<std::string>("version")) << r.out;
    ASSERT_EQ(loaded.rules->claims.size(), 1u) << r.out;
    EXPECT_EQ(loaded.rules->claims[0].idempotency_columns, (std::vector<std::string>{"user_id", "campaign_id"}))
        << r.out;  // the ORM's timestamp is not part of the claim
    EXPECT_NE(r.out.find("never lowered, so not proposed as stock: profile"), std::string::npos) << r.out;
}

// What a sidecar with watch_unlisted_tables on serves at GET /digests after the incident's flow and
// Hibernate's @Version flow on tables no rule names (and a rule's own shape, which is left alone).
const std::string unlisted_digests = R"json({
  "shapes": [
    {"rule": "unlisted:shop.coupon_order", "digest": "b1", "count": 40,
     "statement": "INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())",
     "first_seen": "2026-12-04T10:00:00Z", "last_seen": "2026-12-04T10:01:00Z",
     "actions": {"claimed": {"enforced": 0, "observed": 40}},
     "notes": {"after: shop.coupon_stock": 40, "consumes: campaign_id=campaign_id": 40,
               "columns: user_id, campaign_id": 40}},
    {"rule": "unlisted:shop.coupon_stock", "digest": "a1", "count": 40,
     "statement": "UPDATE coupon_stock SET remain = ? , version = ? WHERE campaign_id = ? AND version = ?",
     "first_seen": "2026-12-04T10:00:00Z", "last_seen": "2026-12-04T10:01:00Z",
     "actions": {"rewritten": {"enforced": 0, "observed": 40}},
     "notes": {"counter: remain": 40, "key_columns: campaign_id": 40, "version: version": 40,
               "after_read: yes": 40}},
    {"rule": "unlisted:shop.sku", "digest": "c1", "count": 3,
     "statement": "UPDATE sku SET qty = qty - ? WHERE sku = ?",
     "first_seen": "2026-12-04T10:00:00Z", "last_seen": "2026-12-04T10:01:00Z",
     "actions": {"rewritten": {"enforced": 0, "observed": 3}},
     "notes": {"counter: qty": 3, "key_columns: sku": 3, "units: 2": 3, "after_read: no": 3}},
    {"rule": "other_stock", "digest": "d1", "count": 9, "statement": "UPDATE other SET n = n - ? WHERE id = ?",
     "first_seen": "2026-12-04T10:00:00Z", "last_seen": "2026-12-04T10:01:00Z",
     "actions": {"rewritten": {"enforced": 9, "observed": 0}}}
  ],
  "dropped": 0, "unlisted_dropped": 0
})json";

TEST_F(cli, suggest_drafts_rules_from_a_sidecars_digests_of_unlisted_tables_and_the_draft_lints) {
    const auto r = run_digests({write("digests.json", unlisted_digests)});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto loaded = rules::load_rules({{"draft.yaml", r.out}});
    ASSERT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : rules::format_diagnostic(loaded.errors[0])) << r.out;
    const auto& set = *loaded.rules;
    EXPECT_EQ(set.default_mode, rules::mode::observe);
    ASSERT_EQ(set.stocks.size(), 2u) << r.out;  // not other_stock: a rule names it already
    EXPECT_EQ(set.stocks[0].table.name, "coupon_stock");
    EXPECT_EQ(set.stocks[0].key_columns, std::vector<std::string>{"campaign_id"});
    EXPECT_EQ(set.stocks[0].counter_column, "remain");
    EXPECT_EQ(set.stocks[0].version_column, std::optional<std::string>("version"));
    EXPECT_EQ(set.stocks[1].table.name, "sku");
    EXPECT_EQ(set.stocks[1].units, 2);
    ASSERT_EQ(set.claims.size(), 1u) << r.out;
    EXPECT_EQ(set.claims[0].table.name, "coupon_order");
    EXPECT_EQ(set.claims[0].idempotency_columns, (std::vector<std::string>{"user_id", "campaign_id"}));
    EXPECT_EQ(set.claims[0].stock_key_mapping,
              (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
    // Every guess says why, from the sidecar's counts.
    EXPECT_NE(r.out.find("# coupon_stock: 40 write(s) the sidecar filed as takes of remain"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("held the value of coupon_stock.campaign_id in 40 of 40 INSERT(s)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("filed in /digests"), std::string::npos) << r.out;
}

TEST_F(cli, suggest_from_digests_says_when_they_hold_nothing_and_refuses_other_json) {
    const auto none = run_digests({write("none.json", R"({"shapes": [], "dropped": 0})")});
    EXPECT_EQ(none.rc, 1);
    EXPECT_NE(none.err.find("watch_unlisted_tables"), std::string::npos) << none.err;
    EXPECT_EQ(run_digests({write("bad.json", "SELECT 1")}).rc, 2);
    EXPECT_EQ(run_digests({write("other.json", R"({"stock_rules": []})")}).rc, 2);
    EXPECT_EQ(run_digests({(dir_ / "missing.json").string()}).rc, 2);
}

TEST_F(cli, suggest_names_the_idempotency_columns_after_an_existing_unique_index) {
    const auto log = write("general.log", incident_general_log);
    std::vector<std::string> asked;
    const unique_keys_lookup indexes = [&](const std::string& table) {
        asked.push_back(table);
        return unique_index_list{{"PRIMARY", {"id"}}, {"uq_claim", {"campaign_id", "user_id"}}};
    };
    std::ostringstream out, err;
    ASSERT_EQ(suggest({log}, {}, indexes, out, err), 0) << err.str();
    EXPECT_EQ(asked, std::vector<std::string>{"coupon_order"});
    const auto loaded = rules::load_rules({{"draft.yaml", out.str()}});
    ASSERT_TRUE(loaded.rules) << out.str();
    ASSERT_EQ(loaded.rules->claims.size(), 1u);
    EXPECT_EQ(loaded.rules->claims[0].idempotency_columns, (std::vector<std::string>{"campaign_id", "user_id"}));
    EXPECT_NE(out.str().find("the existing UNIQUE index uq_claim (campaign_id, user_id)"), std::string::npos)
        << out.str();

    // Only the primary key on id (which the INSERT does not give): the proposal, and why.
    std::ostringstream out2, err2;
    ASSERT_EQ(suggest(
                  {log}, {},
                  [](const std::string&) {
                      return unique_index_list{{"PRIMARY", {"id"}}};
                  },
                  out2, err2),
              0);
    EXPECT_NE(out2.str().find("idempotency_columns: [user_id, campaign_id]"), std::string::npos) << out2.str();
    EXPECT_NE(out2.str().find("no existing UNIQUE index of coupon_order"), std::string::npos) << out2.str();

    // The database cannot be read: no draft, exit 2.
    std::ostringstream out3, err3;
    EXPECT_EQ(suggest(
                  {log}, {}, [](const std::string&) -> unique_index_list { throw std::runtime_error("refused"); }, out3,
                  err3),
              2);
    EXPECT_TRUE(out3.str().empty());
    EXPECT_NE(err3.str().find("refused"), std::string::npos);
}

TEST_F(cli, suggest_says_when_it_finds_nothing) {
    const auto nothing = run(suggest, {write("reads.sql", "SELECT 1; SELECT name FROM users WHERE id = 3;")});
    ASSERT_EQ(nothing.rc, 0) << nothing.err;
    EXPECT_NE(nothing.out.find("No stock table found"), std::string::npos) << nothing.out;
    EXPECT_TRUE(rules::load_rules({{"draft.yaml", nothing.out}}).rules.has_value());
    EXPECT_EQ(run(suggest, {write("empty.sql", "  \n")}).rc, 1);
    EXPECT_EQ(run(suggest, {(dir_ / "missing.log").string()}).rc, 2);
}

}  // namespace
}  // namespace claimguard::rules_cli
