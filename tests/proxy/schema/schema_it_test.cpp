// Integration tests of `claimguard check` against a real MariaDB (fixture: schema_db.py, TLS on).
//
// The incident's legacy schema (sql/legacy_schema.sql) must be reported as missing its UNIQUE
// index, with the duplicates the test inserted counted; after the migration
// (sql/migrations/001_claimguard_unique_index.sql) it must pass. Each test has its own database.
#include <gtest/gtest.h>
#include <mysql.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/schema/check_cli.hpp"
#include "proxy/schema/inspect.hpp"
#include "rules/model/ddl.hpp"

namespace claimguard::schema {
namespace {

const std::string source_dir = CLAIMGUARD_SOURCE_DIR;
const std::string example_rules = source_dir + "/rules/examples/coupon.yaml";
constexpr unsigned duplicate_key_error = 1062;  // ER_DUP_ENTRY

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// STATE_DIR/env written by schema_db.py start.
const std::map<std::string, std::string>& fixture() {
    static const auto env = [] {
        const char* dir = std::getenv("CLAIMGUARD_SCHEMA_STATE_DIR");
        if (dir == nullptr || *dir == '\0')
            throw std::runtime_error("CLAIMGUARD_SCHEMA_STATE_DIR is not set (run through ctest)");
        std::map<std::string, std::string> values;
        std::istringstream in(read_file(std::string(dir) + "/env"));
        for (std::string line; std::getline(in, line);)
            if (const auto eq = line.find('='); eq != std::string::npos)
                values[line.substr(0, eq)] = line.substr(eq + 1);
        return values;
    }();
    return env;
}

std::string fx(const std::string& key) { return fixture().at(key); }

// The admin connection the tests prepare their schemas with (multi-statement scripts).
class admin_connection {
public:
    admin_connection() : m_(mysql_init(nullptr)) {
        const unsigned protocol = MYSQL_PROTOCOL_TCP;
        mysql_optionsv(m_, MYSQL_OPT_PROTOCOL, &protocol);
        if (mysql_real_connect(m_, fx("HOST").c_str(), fx("ADMIN_USER").c_str(), fx("ADMIN_PASSWORD").c_str(), nullptr,
                               static_cast<unsigned>(std::stoul(fx("PORT"))), nullptr,
                               CLIENT_MULTI_STATEMENTS) == nullptr)
            throw std::runtime_error(std::string("admin connect: ") + mysql_error(m_));
    }
    ~admin_connection() { mysql_close(m_); }
    admin_connection(const admin_connection&) = delete;
    admin_connection& operator=(const admin_connection&) = delete;

    // Runs a script; returns the error number of the first failing statement (0: all ran).
    unsigned run(const std::string& sql) {
        if (mysql_real_query(m_, sql.data(), sql.size()) != 0) return mysql_errno(m_);
        for (;;) {
            if (MYSQL_RES* r = mysql_store_result(m_)) mysql_free_result(r);
            const int next = mysql_next_result(m_);
            if (next > 0) return mysql_errno(m_);
            if (next < 0) return 0;
        }
    }
    void must(const std::string& sql) {
        if (const auto e = run(sql); e != 0)
            throw std::runtime_error("SQL failed (" + std::to_string(e) + ": " + mysql_error(m_) + "): " + sql);
    }
    // Number of rows `sql` returns.
    std::size_t rows(const std::string& sql) {
        if (mysql_real_query(m_, sql.data(), sql.size()) != 0)
            throw std::runtime_error(std::string("SQL failed: ") + mysql_error(m_) + ": " + sql);
        MYSQL_RES* r = mysql_store_result(m_);
        if (r == nullptr) throw std::runtime_error("no result set: " + sql);
        const auto n = static_cast<std::size_t>(mysql_num_rows(r));
        mysql_free_result(r);
        return n;
    }

private:
    MYSQL* m_;
};

class schema_it : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        // Parameterised tests are named suite/case: the case name is unique and short enough
        // (database names have at most 64 characters).
        const std::string name = info->name();
        database_ = "cgschema_" + name.substr(name.rfind('/') + 1);
        for (auto& c : database_)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
        admin_.must("DROP DATABASE IF EXISTS `" + database_ + "`; CREATE DATABASE `" + database_ + "`; USE `" +
                    database_ + "`;");
    }
    void TearDown() override {
        if (!HasFailure()) admin_.run("DROP DATABASE IF EXISTS `" + database_ + "`");
    }

    check_options options(std::vector<std::string> rules = {example_rules}) const {
        check_options o;
        o.rules_files = std::move(rules);
        o.backend = fx("HOST") + ":" + fx("PORT");
        o.user = fx("CHECK_USER");
        o.password = fx("CHECK_PASSWORD");
        o.database = database_;
        return o;
    }

    struct run_result {
        int rc;
        std::string out, err;
    };
    run_result check(const check_options& o) const {
        std::ostringstream out, err;
        const int rc = run_check(o, out, err, [](const char*) -> const char* { return nullptr; });
        return {rc, out.str(), err.str()};
    }

    std::string write_rules(const std::string& yaml) const {
        const auto path = std::filesystem::path(::testing::TempDir()) / (database_ + ".yaml");
        std::ofstream(path) << yaml;
        return path.string();
    }

    // The coupon example's claim index, resolved to this test's database.
    rules::unique_index coupon_index() const {
        const std::vector<std::string> cols{"user_id", "campaign_id"};
        return {"coupon_order",
                {database_, "coupon_order"},
                cols,
                rules::unique_index_name("coupon_order", cols),
                rules::unique_index::purpose::idempotency_columns};
    }

    admin_connection admin_;
    std::string database_;
};

// (user_id, campaign_id) -> rows to insert; the expected counts are derived from it.
using claim_plan = std::map<std::pair<int, int>, int>;

void insert_claims(admin_connection& admin, const claim_plan& plan) {
    for (const auto& [key, n] : plan)
        for (int i = 0; i < n; ++i)
            admin.must("INSERT INTO coupon_order (user_id, campaign_id) VALUES (" + std::to_string(key.first) + ", " +
                       std::to_string(key.second) + ")");
}

duplicate_count expected_duplicates(const claim_plan& plan) {
    duplicate_count d;
    for (const auto& [key, n] : plan)
        if (n > 1) {
            ++d.keys;
            d.surplus_rows += static_cast<std::uint64_t>(n - 1);
        }
    return d;
}

TEST_F(schema_it, legacy_schema_with_duplicates_is_missing_and_exits_1) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    const claim_plan plan{{{1, 1}, 3}, {{2, 1}, 2}, {{3, 1}, 1}, {{1, 2}, 1}, {{4, 2}, 4}};
    insert_claims(admin_, plan);
    const auto want = expected_duplicates(plan);

    const auto r = check(options());
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("coupon_order: MISSING: no UNIQUE index on " + database_ + ".coupon_order"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Duplicates: " + std::to_string(want.keys) +
                         " values of (user_id, campaign_id) already "
                         "held by more than one row (" +
                         std::to_string(want.surplus_rows) + " rows beyond"),
              std::string::npos)
        << r.out;
    const auto fix = rules::add_index_statement(coupon_index());
    EXPECT_NE(r.out.find(fix), std::string::npos) << r.out;

    // What the report says is what the server does: the fix fails while duplicates exist, and
    // the query it prints lists exactly the duplicate keys.
    admin_.must("USE `" + database_ + "`");
    EXPECT_EQ(admin_.run(fix), duplicate_key_error);
    EXPECT_EQ(admin_.rows(rules::duplicates_query(coupon_index())), want.keys);
}

TEST_F(schema_it, after_the_migration_it_is_covered_and_exits_0) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    insert_claims(admin_, {{{1, 1}, 1}, {{2, 1}, 1}, {{1, 2}, 1}});
    auto before = options();
    before.json = true;
    auto r = check(before);
    ASSERT_EQ(r.rc, 1) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["rules"][0]["indexes"][0]["status"], "missing");
    EXPECT_EQ(j["rules"][0]["indexes"][0]["duplicates"]["keys"], 0);

    admin_.must(read_file(source_dir + "/sql/migrations/001_claimguard_unique_index.sql"));
    r = check(before);
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ok"], true);
    EXPECT_EQ(j["rules"][0]["status"], "covered");
    EXPECT_EQ(j["rules"][0]["indexes"][0]["covering_index"]["name"], coupon_index().name);

    const auto text = check(options());
    EXPECT_EQ(text.rc, 0) << text.out << text.err;
    EXPECT_NE(text.out.find("coupon_order: OK: UNIQUE index `" + coupon_index().name + "`"), std::string::npos)
        << text.out;
}

TEST_F(schema_it, rows_holding_null_are_not_counted_as_duplicates) {
    admin_.must(
        "CREATE TABLE coupon_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NULL, "
        "campaign_id BIGINT NOT NULL)");
    admin_.must("INSERT INTO coupon_order (user_id, campaign_id) VALUES (NULL, 1), (NULL, 1), (7, 1), (7, 1)");
    const auto r = check(options());
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("Duplicates: 1 value of (user_id, campaign_id) already held by more than one row (1 row "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Note: user_id allows NULL"), std::string::npos) << r.out;
    // The server agrees: without the (7, 1) pair the index goes in although (NULL, 1) repeats.
    admin_.must("DELETE FROM coupon_order WHERE user_id = 7 LIMIT 1");
    EXPECT_EQ(admin_.run(rules::add_index_statement(coupon_index())), 0u);
}

// The example stock rule's table, for tests that vary only the claim table.
constexpr const char* stock_table_ddl =
    "CREATE TABLE coupon_stock (campaign_id BIGINT NOT NULL PRIMARY KEY, remain INT NOT NULL, "
    "version INT NOT NULL DEFAULT 0)";

struct server_case {
    const char* name;
    const char* ddl;  // creates coupon_order in the test's database (empty: no table)
    const char* status;
    int rc;
};

std::ostream& operator<<(std::ostream& os, const server_case& c) { return os << c.name; }

class schema_it_server : public schema_it, public ::testing::WithParamInterface<server_case> {};

TEST_P(schema_it_server, decides_like_the_unit_tests) {
    const auto& c = GetParam();
    admin_.must(stock_table_ddl);  // the stock rule's table must exist too (issue 17)
    if (*c.ddl != '\0') admin_.must(c.ddl);
    auto o = options();
    o.json = true;
    const auto r = check(o);
    EXPECT_EQ(r.rc, c.rc) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["rules"][0]["indexes"][0]["status"], c.status) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    schema, schema_it_server,
    ::testing::Values(
        server_case{"superset_unique_index",
                    "CREATE TABLE coupon_order (id INT PRIMARY KEY, user_id INT NOT NULL, campaign_id INT NOT NULL, "
                    "created_at DATETIME NOT NULL, UNIQUE KEY uq_wide (user_id, campaign_id, created_at))",
                    "missing", 1},
        server_case{"stricter_unique_index",
                    "CREATE TABLE coupon_order (id INT PRIMARY KEY, user_id INT NOT NULL, campaign_id INT NOT NULL, "
                    "UNIQUE KEY uq_user (user_id))",
                    "covered_stricter", 0},
        server_case{"primary_key_on_the_business_key",
                    "CREATE TABLE coupon_order (user_id INT NOT NULL, campaign_id INT NOT NULL, "
                    "PRIMARY KEY (campaign_id, user_id))",
                    "covered", 0},
        server_case{"non_unique_index",
                    "CREATE TABLE coupon_order (id INT PRIMARY KEY, user_id INT NOT NULL, campaign_id INT NOT NULL, "
                    "KEY idx_uc (user_id, campaign_id))",
                    "missing", 1},
        server_case{"column_names_in_another_case",
                    "CREATE TABLE coupon_order (id INT PRIMARY KEY, USER_ID INT NOT NULL, Campaign_Id INT NOT NULL, "
                    "UNIQUE KEY uq (Campaign_Id, USER_ID))",
                    "covered", 0},
        server_case{"column_missing",
                    "CREATE TABLE coupon_order (id INT PRIMARY KEY, user_id INT NOT NULL, campaign INT NOT NULL)",
                    "column_missing", 1},
        server_case{"table_missing", "", "table_missing", 1}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(schema_it, idempotency_key_column_needs_its_own_unique_index) {
    const auto rules_file = write_rules(R"(
stock_rules:
  - {name: coupon_stock, table: coupon_stock, key_columns: [campaign_id], counter_column: remain}
claim_rules:
  - name: coupon_order
    table: coupon_order
    idempotency_columns: [user_id, campaign_id]
    idempotency_key_column: request_id
    consumes: {rule: coupon_stock, columns: {campaign_id: campaign_id}}
)");
    admin_.must(stock_table_ddl);
    admin_.must(
        "CREATE TABLE coupon_order (id INT PRIMARY KEY, user_id INT NOT NULL, campaign_id INT NOT NULL, "
        "request_id CHAR(36) NOT NULL, UNIQUE KEY uq (user_id, campaign_id))");
    auto o = options({rules_file});
    o.json = true;
    auto r = check(o);
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rules"][0]["indexes"].size(), 2u) << r.out;
    EXPECT_EQ(j["rules"][0]["indexes"][0]["status"], "covered");
    EXPECT_EQ(j["rules"][0]["indexes"][1]["purpose"], "idempotency_key_column");
    EXPECT_EQ(j["rules"][0]["indexes"][1]["status"], "missing");

    // The printed fix, applied as printed, makes the check pass.
    admin_.must("USE `" + database_ + "`");
    admin_.must(j["rules"][0]["indexes"][1]["fix"].get<std::string>());
    r = check(o);
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

TEST_F(schema_it, wrong_password_exits_2_without_printing_it) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    auto o = options();
    o.password = "not-the-Password-9";
    const auto r = check(o);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("Access denied"), std::string::npos) << r.err;
    EXPECT_EQ((r.out + r.err).find("not-the-Password-9"), std::string::npos);
}

TEST_F(schema_it, password_from_the_environment) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    auto o = options();
    o.password.reset();
    const auto password = fx("CHECK_PASSWORD");
    std::ostringstream out, err;
    const auto env = [&](const char* name) -> const char* {
        return std::string_view(name) == password_env_var ? password.c_str() : nullptr;
    };
    EXPECT_EQ(run_check(o, out, err, env), 1) << out.str() << err.str();
    std::ostringstream out2, err2;
    EXPECT_EQ(run_check(o, out2, err2, [](const char*) -> const char* { return nullptr; }), 2) << err2.str();
}

TEST_F(schema_it, unknown_database_exits_2) {
    auto o = options();
    o.database = "cgschema_no_such_database";
    const auto r = check(o);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("cgschema_no_such_database"), std::string::npos) << r.err;
}

TEST_F(schema_it, tls_verified_against_the_servers_ca) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    auto o = options();
    o.tls.enabled = true;
    o.tls.verify = true;
    o.tls.ca_file = fx("CA_FILE");
    o.json = true;
    const auto r = check(o);
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["tls_cipher"].is_string()) << r.out;

    o.tls.ca_file = fx("OTHER_CA_FILE");
    const auto refused = check(o);
    EXPECT_EQ(refused.rc, 2) << refused.out << refused.err;
}

TEST_F(schema_it, plain_connection_reports_no_cipher) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    connection_options c;
    c.host = fx("HOST");
    c.port = static_cast<std::uint16_t>(std::stoul(fx("PORT")));
    c.user = fx("CHECK_USER");
    c.password = fx("CHECK_PASSWORD");
    c.database = database_;
    auto conn = inspector::connect(c);
    ASSERT_TRUE(conn) << conn.error().message;
    EXPECT_TRUE(conn->tls_cipher().empty());
}

// Issue 13: the timeouts that bound an orphaned transaction's row locks, read from the real server.
TEST_F(schema_it, reports_the_servers_orphan_timeouts) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    auto o = options();
    o.json = true;
    const auto r = check(o);
    ASSERT_EQ(r.rc, 1) << r.out << r.err;  // the legacy schema lacks the index; the timeouts never change that
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j["timeouts_error"].is_null()) << j["timeouts_error"];
    const auto& values = j["timeouts"]["values"];
    EXPECT_TRUE(values["wait_timeout"].is_number()) << values;
    EXPECT_TRUE(values["innodb_lock_wait_timeout"].is_number()) << values;
    // MariaDB has the idle transaction timeouts (10.3+); this fixture runs their default, 0 (off).
    EXPECT_EQ(values["idle_write_transaction_timeout"], 0) << values;
    EXPECT_EQ(values["idle_transaction_timeout"], 0) << values;
    const auto text = check(options());
    EXPECT_NE(text.out.find("idle_write_transaction_timeout = 0 (off): WARNING: RECOMMENDED 30"), std::string::npos)
        << text.out;
}

TEST_F(schema_it, startup_check_skips_the_duplicate_scan) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    insert_claims(admin_, {{{1, 1}, 2}});
    const auto loaded = engine::load_rules_files({example_rules});
    ASSERT_TRUE(loaded.rules);
    connection_options c;
    c.host = fx("HOST");
    c.port = static_cast<std::uint16_t>(std::stoul(fx("PORT")));
    c.user = fx("CHECK_USER");
    c.password = fx("CHECK_PASSWORD");
    c.database = database_;
    const auto startup = check_schema(*loaded.rules, c);
    ASSERT_TRUE(startup.error.empty()) << startup.error;
    ASSERT_EQ(startup.checks.size(), 1u);
    EXPECT_EQ(startup.checks[0].status, index_status::missing);
    EXPECT_FALSE(startup.checks[0].duplicates.has_value());
    const auto full = check_schema(*loaded.rules, c, duplicate_scan::count);
    ASSERT_TRUE(full.checks[0].duplicates.has_value());
    EXPECT_EQ(full.checks[0].duplicates->keys, 1u);

    c.password = "wrong";
    const auto unreachable = check_schema(*loaded.rules, c);
    EXPECT_FALSE(unreachable.error.empty());
    EXPECT_EQ(exit_code(unreachable), 2);
}

// --- issue 17: the rules' names against the tables, and database code ----------------------------

std::string example_rules_with(const std::string& from, const std::string& to) {
    auto text = read_file(example_rules);
    const auto at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error("not in the example rules: " + from);
    return text.replace(at, from.size(), to);
}

TEST_F(schema_it, counter_column_typo_exits_1_naming_the_line) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    admin_.must(rules::add_index_statement(coupon_index()));
    const auto rules_file = write_rules(example_rules_with("counter_column: remain ", "counter_column: remainder"));
    auto r = check(options({rules_file}));
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    // Line 12 of the example rules is the counter_column: line; column 21 its value.
    const auto want = rules_file +
                      ":12:21: error: rule coupon_stock, counter_column: coupon_stock.remainder: no such column "
                      "(columns: campaign_id, remain, version)";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    auto o = options({rules_file});
    o.json = true;
    r = check(o);
    EXPECT_EQ(r.rc, 1);
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rule_errors"].size(), 1u) << r.out;
    EXPECT_EQ(j["rule_errors"][0]["line"], 12);
    EXPECT_EQ(j["rule_errors"][0]["field"], "counter_column");

    // The example as shipped passes on the same database.
    EXPECT_EQ(check(options()).rc, 0);
}

TEST_F(schema_it, counter_that_is_not_an_integer_exits_1) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    admin_.must(rules::add_index_statement(coupon_index()));
    admin_.must("ALTER TABLE coupon_stock MODIFY remain DECIMAL(10, 2) NOT NULL");
    const auto r = check(options());
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("coupon_stock.remain: the counter is decimal(10,2), not an integer type"), std::string::npos)
        << r.out;
}

TEST_F(schema_it, missing_stock_table_exits_1) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    admin_.must(rules::add_index_statement(coupon_index()));
    admin_.must("DROP TABLE coupon_stock");
    const auto r = check(options());
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(
        r.out.find(":10:12: error: rule coupon_stock, table: coupon_stock: no such table in database " + database_),
        std::string::npos)
        << r.out;
}

TEST_F(schema_it, database_code_is_reported_by_kind_and_name) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    admin_.must(rules::add_index_statement(coupon_index()));
    admin_.must(R"(
        CREATE TABLE ticket (id INT PRIMARY KEY AUTO_INCREMENT, campaign_id BIGINT NOT NULL);
        CREATE PROCEDURE claim_coupon(IN u BIGINT, IN c BIGINT)
        BEGIN
          UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = c AND remain > 0;
          INSERT INTO coupon_order (user_id, campaign_id) VALUES (u, c);
        END;
        CREATE PROCEDURE say_hello() SELECT 'coupon_stock_log is another table';
        CREATE VIEW v_stock AS SELECT campaign_id, remain FROM `coupon_stock`;
        CREATE VIEW v_open AS SELECT campaign_id FROM v_stock WHERE remain > 0;
        CREATE TRIGGER trg_ticket AFTER INSERT ON ticket FOR EACH ROW
          UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = NEW.campaign_id;
        CREATE EVENT ev_refill ON SCHEDULE EVERY 1 DAY DISABLE DO UPDATE COUPON_STOCK SET remain = 100;
    )");
    auto r = check(options());
    EXPECT_EQ(r.rc, 0) << r.out << r.err;  // warnings: the rules themselves are fine
    for (const auto& want : {
             "WARNING: procedure " + database_ +
                 ".claim_coupon reaches rule coupon_stock (its text names coupon_stock)",
             "WARNING: procedure " + database_ +
                 ".claim_coupon reaches rule coupon_order (its text names coupon_order)",
             "WARNING: view " + database_ + ".v_stock reaches rule coupon_stock",
             "WARNING: view " + database_ + ".v_open reaches rule coupon_stock (its text names v_stock)",
             "WARNING: trigger " + database_ + ".trg_ticket on ticket reaches rule coupon_stock",
             "WARNING: event " + database_ + ".ev_refill reaches rule coupon_stock",
         })
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
    EXPECT_EQ(r.out.find("say_hello"), std::string::npos) << r.out;

    auto o = options();
    o.json = true;
    r = check(o);
    EXPECT_EQ(r.rc, 0);
    const auto j = nlohmann::json::parse(r.out);
    std::vector<std::string> found;
    for (const auto& c : j["database_code"])
        found.push_back(c["kind"].get<std::string>() + " " + c["name"].get<std::string>() + " " +
                        c["rule"].get<std::string>());
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, (std::vector<std::string>{"event ev_refill coupon_stock", "procedure claim_coupon coupon_order",
                                               "procedure claim_coupon coupon_stock", "trigger trg_ticket coupon_stock",
                                               "view v_open coupon_stock", "view v_stock coupon_stock"}))
        << r.out;
    EXPECT_TRUE(j["database_code_error"].is_null()) << r.out;

    // Dropped, it is no longer reported.
    admin_.must(
        "DROP PROCEDURE claim_coupon; DROP VIEW v_open; DROP VIEW v_stock; DROP TRIGGER trg_ticket; DROP EVENT "
        "ev_refill");
    r = check(o);
    EXPECT_TRUE(nlohmann::json::parse(r.out)["database_code"].empty()) << r.out;
}

// With SELECT only (no SHOW VIEW, TRIGGER, EVENT, mysql.proc) the server hides most database code: a
// view's text is empty (reported as not visible), routines, triggers and events are not listed at all.
TEST_F(schema_it, select_only_user_is_told_what_it_cannot_see) {
    admin_.must(read_file(source_dir + "/sql/legacy_schema.sql"));
    admin_.must(rules::add_index_statement(coupon_index()));
    admin_.must("CREATE VIEW v_stock AS SELECT campaign_id, remain FROM coupon_stock");
    admin_.must("CREATE PROCEDURE p_take() UPDATE coupon_stock SET remain = remain - 1");
    const std::string user = "cg_schema_select_only";
    admin_.run("DROP USER IF EXISTS '" + user + "'@'%'");
    admin_.must("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'select-Only-3'; GRANT SELECT ON `" + database_ +
                "`.* TO '" + user + "'@'%'");
    auto o = options();
    o.user = user;
    o.password = "select-Only-3";
    o.json = true;
    const auto r = check(o);
    admin_.run("DROP USER IF EXISTS '" + user + "'@'%'");
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["database_code"].empty()) << r.out;
    ASSERT_TRUE(j["database_code_error"].is_string()) << r.out;
    EXPECT_NE(j["database_code_error"].get<std::string>().find("cannot see the text of view " + database_ + ".v_stock"),
              std::string::npos)
        << r.out;
}

}  // namespace
}  // namespace claimguard::schema
