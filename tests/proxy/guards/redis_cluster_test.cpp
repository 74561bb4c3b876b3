// redis_guard against a real 3-master Redis Cluster (redis-cli --cluster create): keys land on
// every master by slot, an ASK during a slot migration and a MOVED after it are followed once,
// and a paused master costs only its own slots, each within the timeout.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <sstream>

#include "proxy/admin/metrics.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "redis_server.hpp"

namespace claimguard::guards {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::redis_server;

constexpr auto test_timeout = 200ms;
constexpr int masters = 3;

double metric(const std::string& sample) {
    std::istringstream in(admin::default_registry().render());
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    return 0;
}

struct cluster {
    std::vector<std::unique_ptr<redis_server>> nodes;
    cluster() {
        std::string create = "redis-cli --cluster create";
        for (int i = 0; i < masters; ++i) {
            nodes.push_back(std::make_unique<redis_server>(
                "cluster-enabled yes\ncluster-node-timeout 2000\ncluster-config-file nodes.conf"));
            create += " 127.0.0.1:" + std::to_string(nodes.back()->port());
        }
        if (std::system((create + " --cluster-yes >/dev/null 2>&1").c_str()) != 0)
            throw std::runtime_error("redis-cli --cluster create failed");
        auto deadline = std::chrono::steady_clock::now() + 20s;
        for (auto& n : nodes) {
            while (n->command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
                if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("cluster not ok");
                std::this_thread::sleep_for(50ms);
            }
        }
    }
    std::string id(int i) const { return nodes[static_cast<std::size_t>(i)]->command({"CLUSTER", "MYID"}); }
};

struct fixture {
    asio::io_context ioc{1};
    std::unique_ptr<redis_guard> guard;
    explicit fixture(const cluster& c) {
        redis_options o;
        o.nodes = {{"127.0.0.1", c.nodes[0]->port()}};  // one seed is enough: the slot map names the rest
        o.cluster = true;
        o.command_timeout = test_timeout;
        o.reconnect_interval = 100ms;
        o.slot_refresh_interval = 100ms;
        guard = std::make_unique<redis_guard>(ioc.get_executor(), o);
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
    void settle(std::chrono::milliseconds d) {
        ioc.restart();
        ioc.run_for(d);
    }
    acquire_result acquire_when_up(const std::string& key) {
        auto deadline = std::chrono::steady_clock::now() + 3s;
        acquire_result r = acquire_result::unavailable;
        while (std::chrono::steady_clock::now() < deadline) {
            r = run(guard->acquire(key, random_token(), 30s));
            if (r != acquire_result::unavailable) return r;
            settle(50ms);
        }
        return r;
    }
};

// A key whose slot is `slot` (hash tag search).
std::string key_in_slot(std::uint16_t slot, const std::string& prefix) {
    for (int i = 0;; ++i) {
        auto tag = std::to_string(i);
        if (key_slot(tag) == slot) return prefix + "{" + tag + "}";
    }
}

TEST(redis_cluster, keys_land_on_every_master_and_release_goes_to_the_keys_node) {
    cluster c;
    fixture f(c);
    ASSERT_EQ(f.acquire_when_up("lock:warmup"), acquire_result::acquired);
    f.settle(200ms);  // the slot map
    auto moved = metric("claimguard_redis_redirects_total{kind=\"moved\"}");
    for (int user = 0; user < 300; ++user) {
        auto key = "lock:coupon:" + std::to_string(user) + ":7";
        auto token = random_token();
        ASSERT_EQ(f.run(f.guard->acquire(key, token, 30s)), acquire_result::acquired) << key;
        if (user % 3 == 0) {
            EXPECT_TRUE(f.run(f.guard->release(key, token))) << key;
        }
    }
    for (int i = 0; i < masters; ++i) EXPECT_GT(std::stoi(c.nodes[static_cast<std::size_t>(i)]->command({"DBSIZE"})), 50);
    EXPECT_EQ(metric("claimguard_redis_redirects_total{kind=\"moved\"}"), moved) << "a fresh slot map needs no redirects";
    EXPECT_EQ(f.run(f.guard->acquire("lock:coupon:1:7", "again", 30s)), acquire_result::pending);
}

TEST(redis_cluster, ask_during_a_migration_and_moved_after_it) {
    cluster c;
    fixture f(c);
    ASSERT_EQ(f.acquire_when_up("lock:warmup"), acquire_result::acquired);
    f.settle(200ms);
    // Slot 0 belongs to node 0 (redis-cli gives the first master the first range).
    const std::uint16_t slot = 0;
    auto src = c.id(0), dst = c.id(1);
    ASSERT_EQ(c.nodes[1]->command({"CLUSTER", "SETSLOT", "0", "IMPORTING", src}), "OK");
    ASSERT_EQ(c.nodes[0]->command({"CLUSTER", "SETSLOT", "0", "MIGRATING", dst}), "OK");
    auto ask = metric("claimguard_redis_redirects_total{kind=\"ask\"}");
    auto key = key_in_slot(slot, "lock:migrating:");  // not on the source: it answers ASK
    EXPECT_EQ(f.run(f.guard->acquire(key, random_token(), 30s)), acquire_result::acquired);
    EXPECT_EQ(metric("claimguard_redis_redirects_total{kind=\"ask\"}"), ask + 1);
    EXPECT_EQ(c.nodes[1]->command({"CLUSTER", "COUNTKEYSINSLOT", "0"}), "1") << "the key went to the importing node";
    // The migration ends: every node learns that node 1 owns the slot. The guard's map is stale.
    for (auto& n : c.nodes) ASSERT_EQ(n->command({"CLUSTER", "SETSLOT", "0", "NODE", dst}), "OK");
    auto moved = metric("claimguard_redis_redirects_total{kind=\"moved\"}");
    auto key2 = key_in_slot(slot, "lock:moved:");
    const auto token2 = random_token();
    EXPECT_EQ(f.run(f.guard->acquire(key2, token2, 30s)), acquire_result::acquired);
    EXPECT_EQ(metric("claimguard_redis_redirects_total{kind=\"moved\"}"), moved + 1);
    EXPECT_TRUE(f.run(f.guard->commit(key2, token2, 30s)));  // the commit mark reaches the key's node too
    EXPECT_EQ(f.run(f.guard->acquire(key2, random_token(), 30s)), acquire_result::held);  // no new redirect needed
    EXPECT_EQ(metric("claimguard_redis_redirects_total{kind=\"moved\"}"), moved + 1);
}

TEST(redis_cluster, a_paused_master_costs_only_its_slots) {
    cluster c;
    fixture f(c);
    ASSERT_EQ(f.acquire_when_up("lock:warmup"), acquire_result::acquired);
    f.settle(200ms);
    c.nodes[2]->pause();
    int acquired = 0, unavailable = 0;
    for (int user = 0; user < 60; ++user) {
        auto started = std::chrono::steady_clock::now();
        auto r = f.run(f.guard->acquire("lock:p:" + std::to_string(user), random_token(), 30s));
        EXPECT_LT(std::chrono::steady_clock::now() - started, test_timeout + 100ms);
        (r == acquire_result::acquired ? acquired : unavailable)++;
    }
    c.nodes[2]->resume();
    EXPECT_GT(acquired, 25);
    EXPECT_GT(unavailable, 5);
}

}  // namespace
}  // namespace claimguard::guards
