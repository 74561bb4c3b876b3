// redis_guard against real redis-server processes: the lock itself, AUTH (requirepass and ACL
// users, a password file, a wrong password, a revoked user), TLS with a throwaway CA, a node
// down or paused, and a one-master cluster's MOVED handling. Each wait is bounded by the guard's
// own timeout; the tests check that bound too.
#include "proxy/guards/redis_guard.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fstream>
#include <sstream>

#include "proxy/admin/metrics.hpp"
#include "redis_server.hpp"

namespace claimguard::guards {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::redis_server;

constexpr auto test_timeout = 200ms;  // the guard's command timeout in these tests
constexpr std::chrono::milliseconds connect_wait = 3s;
constexpr std::chrono::milliseconds refusal_wait = 1s;  // when the test expects no connection at all

// The value of one sample line of /metrics ("name{labels}"), 0 when absent.
double metric(const std::string& sample) {
    std::istringstream in(admin::default_registry().render());
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    return 0;
}

struct fixture {
    asio::io_context ioc{1};
    std::unique_ptr<redis_guard> guard;

    explicit fixture(redis_options o) {
        o.command_timeout = test_timeout;
        o.reconnect_interval = 100ms;
        guard = std::make_unique<redis_guard>(ioc.get_executor(), std::move(o));
    }
    ~fixture() {
        guard.reset();
        ioc.restart();
        ioc.poll();
    }
    template <typename T>
    T run(asio::awaitable<T> a) {
        auto f = asio::co_spawn(ioc, std::move(a), asio::use_future);
        ioc.restart();
        while (f.wait_for(0s) != std::future_status::ready) ioc.run_one_for(10ms);
        return f.get();
    }
    // Waits (bounded) until the guard answers acquire with something other than unavailable.
    acquire_result acquire_when_up(const std::string& key, std::chrono::milliseconds wait = connect_wait) {
        auto deadline = std::chrono::steady_clock::now() + wait;
        acquire_result r = acquire_result::unavailable;
        while (std::chrono::steady_clock::now() < deadline) {
            r = run(guard->acquire(key, random_token(), 10s));
            if (r != acquire_result::unavailable) return r;
            ioc.restart();
            ioc.run_for(50ms);
        }
        return r;
    }
};

redis_options options_for(const redis_server& s) {
    redis_options o;
    o.nodes = {{"127.0.0.1", s.port()}};
    return o;
}

TEST(redis_guard, acquire_held_and_compare_and_delete_release) {
    redis_server server;
    fixture f(options_for(server));
    ASSERT_EQ(f.acquire_when_up("lock:coupon:1:7"), acquire_result::acquired);
    // Not committed yet: a second claim is left to the database.
    EXPECT_EQ(f.run(f.guard->acquire("lock:coupon:1:7", "other", 10s)), acquire_result::pending);
    EXPECT_FALSE(f.run(f.guard->release("lock:coupon:1:7", "not-the-token")));
    EXPECT_NE(server.command({"GET", "lock:coupon:1:7"}), "(nil)");
    auto token = random_token();
    ASSERT_EQ(f.run(f.guard->acquire("lock:coupon:2:7", token, 10s)), acquire_result::acquired);
    EXPECT_EQ(server.command({"GET", "lock:coupon:2:7"}), "p:" + token);
    EXPECT_FALSE(f.run(f.guard->commit("lock:coupon:2:7", "not-the-token", 10s)));
    EXPECT_TRUE(f.run(f.guard->commit("lock:coupon:2:7", token, 10s)));
    EXPECT_EQ(server.command({"GET", "lock:coupon:2:7"}), "c:" + token);
    EXPECT_EQ(f.run(f.guard->acquire("lock:coupon:2:7", "other", 10s)), acquire_result::held);  // committed
    // A key an earlier version wrote (the bare token) counts as committed.
    ASSERT_EQ(server.command({"SET", "lock:coupon:3:7", "bare-token"}), "OK");
    EXPECT_EQ(f.run(f.guard->acquire("lock:coupon:3:7", "other", 10s)), acquire_result::held);
    EXPECT_TRUE(f.run(f.guard->release("lock:coupon:2:7", token)));
    EXPECT_EQ(server.command({"GET", "lock:coupon:2:7"}), "(nil)");
}

TEST(redis_guard, auth_with_requirepass) {
    redis_server server("requirepass pw-Plain1");
    auto o = options_for(server);
    o.credentials.password = "pw-Plain1";
    EXPECT_EQ(check_redis_credentials(o), "");
    fixture f(o);
    EXPECT_EQ(f.acquire_when_up("k:req"), acquire_result::acquired);
}

TEST(redis_guard, auth_with_an_acl_user_and_a_password_file) {
    redis_server server("user default off\nuser claimguard on >pw-Acl1 ~lock:* +set +eval +get +del +ping");
    auto file = server.dir() / "password";
    std::ofstream(file) << "pw-Acl1\n";  // a mounted Secret ends with a newline
    auto o = options_for(server);
    o.credentials = {"claimguard", "", file.string()};
    EXPECT_EQ(check_redis_credentials(o), "");
    fixture f(o);
    EXPECT_EQ(f.acquire_when_up("lock:acl"), acquire_result::acquired);
}

TEST(redis_guard, wrong_password_is_reported_at_start_up_and_counted) {
    redis_server server("user default off\nuser claimguard on >pw-Acl1 ~lock:* +@all");
    auto o = options_for(server);
    o.credentials = {"claimguard", "not-it", ""};
    auto refused = check_redis_credentials(o);
    EXPECT_EQ(refused.rfind("WRONGPASS", 0), 0u) << refused;
    EXPECT_EQ(refused.find("not-it"), std::string::npos) << "the secret must never be in a message";
    auto before = metric("claimguard_redis_errors_total{kind=\"auth\"}");
    auto fail_open = metric("claimguard_redis_fail_open_total");
    fixture f(o);
    EXPECT_EQ(f.acquire_when_up("lock:x", refusal_wait), acquire_result::unavailable);
    EXPECT_GT(metric("claimguard_redis_errors_total{kind=\"auth\"}"), before);
    EXPECT_GT(metric("claimguard_redis_fail_open_total"), fail_open);
}

TEST(redis_guard, user_revoked_mid_run_fails_open_within_the_timeout) {
    redis_server server("user claimguard on >pw-Acl1 ~lock:* +@all");
    auto o = options_for(server);
    o.credentials = {"claimguard", "pw-Acl1", ""};
    fixture f(o);
    ASSERT_EQ(f.acquire_when_up("lock:a"), acquire_result::acquired);
    EXPECT_EQ(server.command({"ACL", "DELUSER", "claimguard"}), "1");  // also closes its connections
    auto fail_open = metric("claimguard_redis_fail_open_total");
    for (int i = 0; i < 20; ++i) {
        auto started = std::chrono::steady_clock::now();
        EXPECT_EQ(f.run(f.guard->acquire("lock:b" + std::to_string(i), random_token(), 10s)),
                  acquire_result::unavailable);
        EXPECT_LT(std::chrono::steady_clock::now() - started, test_timeout + 100ms);
        f.ioc.restart();
        f.ioc.run_for(20ms);  // lets reconnects (refused now) happen
    }
    EXPECT_GE(metric("claimguard_redis_fail_open_total") - fail_open, 20);
}

TEST(redis_guard, paused_node_fails_open_within_the_timeout_then_recovers) {
    redis_server server;
    fixture f(options_for(server));
    ASSERT_EQ(f.acquire_when_up("lock:p0"), acquire_result::acquired);
    server.pause();
    for (int i = 0; i < 5; ++i) {
        auto started = std::chrono::steady_clock::now();
        EXPECT_EQ(f.run(f.guard->acquire("lock:p" + std::to_string(i + 1), random_token(), 10s)),
                  acquire_result::unavailable);
        auto took = std::chrono::steady_clock::now() - started;
        EXPECT_LT(took, test_timeout + 100ms);
    }
    server.resume();
    EXPECT_EQ(f.acquire_when_up("lock:p9"), acquire_result::acquired);
}

TEST(redis_guard, node_down_answers_unavailable_at_once) {
    auto port = test::free_port();  // nobody listens
    redis_options o;
    o.nodes = {{"127.0.0.1", port}};
    EXPECT_EQ(check_redis_credentials(o), "");  // down is not a start-up error
    fixture f(o);
    auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(f.run(f.guard->acquire("k", random_token(), 10s)), acquire_result::unavailable);
    EXPECT_LT(std::chrono::steady_clock::now() - started, test_timeout + 100ms);
}

// A throwaway CA and a server certificate for 127.0.0.1 / "redis.test", made with openssl.
struct test_pki {
    std::filesystem::path dir;
    explicit test_pki(const std::filesystem::path& d) : dir(d) {
        auto p = [&](const char* f) { return (dir / f).string(); };
        std::ofstream(p("ext.cnf")) << "subjectAltName=DNS:redis.test,IP:127.0.0.1\n";
        std::string cmd =
            "cd " + dir.string() + " && " +
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=claimguard-test-ca -keyout ca.key -out ca.crt && "
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=redis.test -keyout server.key -out server.csr && "
            "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext.cnf "
            "-out server.crt && "
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=claimguard -keyout client.key -out client.csr && "
            "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -out client.crt";
        if (std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) != 0) throw std::runtime_error("openssl failed");
    }
    [[nodiscard]] std::string file(const char* f) const { return (dir / f).string(); }
    [[nodiscard]] std::string server_config() const {
        return "tls-cert-file " + file("server.crt") + "\ntls-key-file " + file("server.key") + "\ntls-ca-cert-file " +
               file("ca.crt") + "\ntls-auth-clients yes\n";
    }
    [[nodiscard]] std::shared_ptr<asio::ssl::context> client(bool with_certificate) const {
        auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
        ctx->load_verify_file(file("ca.crt"));
        if (with_certificate) {
            ctx->use_certificate_chain_file(file("client.crt"));
            ctx->use_private_key_file(file("client.key"), asio::ssl::context::pem);
        }
        return ctx;
    }
};

struct tls_redis {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / ("cg-pki-" + std::to_string(::getpid()));
    std::unique_ptr<test_pki> pki;
    std::unique_ptr<redis_server> server;
    tls_redis() {
        std::filesystem::create_directories(dir);
        pki = std::make_unique<test_pki>(dir);
        server = std::make_unique<redis_server>(pki->server_config() + "requirepass pw-Tls1", true);
    }
    ~tls_redis() {
        server.reset();
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
};

TEST(redis_guard, tls_verified_with_client_certificate_and_auth) {
    tls_redis r;
    auto o = options_for(*r.server);
    o.tls = r.pki->client(true);
    o.credentials.password = "pw-Tls1";
    EXPECT_EQ(check_redis_credentials(o), "");
    fixture f(o);
    EXPECT_EQ(f.acquire_when_up("lock:tls"), acquire_result::acquired);
}

TEST(redis_guard, tls_refuses_a_wrong_server_name_or_a_missing_client_certificate) {
    tls_redis r;
    auto o = options_for(*r.server);
    o.tls = r.pki->client(true);
    o.credentials.password = "pw-Tls1";
    o.tls_server_name = "other.test";  // the certificate says redis.test and 127.0.0.1
    {
        fixture f(o);
        EXPECT_EQ(f.acquire_when_up("lock:tls-name", refusal_wait), acquire_result::unavailable);
    }
    o.tls_server_name = "redis.test";
    {
        fixture f(o);
        EXPECT_EQ(f.acquire_when_up("lock:tls-name2"), acquire_result::acquired);
    }
    o.tls = r.pki->client(false);
    {
        fixture f(o);
        EXPECT_EQ(f.acquire_when_up("lock:tls-nocert", refusal_wait), acquire_result::unavailable);
    }
}

}  // namespace
}  // namespace claimguard::guards
