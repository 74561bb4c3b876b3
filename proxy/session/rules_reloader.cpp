// Rules reloads and the inotify watcher.
#include "rules_reloader.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>

#include "claim_metrics.hpp"
#include "proxy/admin/metrics.hpp"

namespace claimguard::session {

namespace asio = boost::asio;

namespace {

// Editors and kubelet write in several steps: one reload after the burst.
constexpr std::chrono::milliseconds reload_debounce{300};
constexpr std::size_t inotify_buffer_bytes = 16 * 1024;

struct reload_metrics {
    admin::gauge& last_successful;
    admin::gauge& last_success_time;
    admin::family<admin::counter>& reloads;
    admin::gauge& stock_rules;
    admin::gauge& claim_rules;
    admin::family<admin::gauge>& info;

    static reload_metrics& get() {
        auto& r = admin::default_registry();
        static reload_metrics m{
            r.add_gauge("claimguard_rules_last_reload_successful",
                        "1 if the last rules (re)load was valid and applied"),
            r.add_gauge("claimguard_rules_last_reload_success_timestamp_seconds",
                        "Unix time of the last rules load that was applied"),
            r.counter_family("claimguard_rules_reloads_total", "Rules (re)loads by result", {"result"}),
            r.add_gauge("claimguard_rules_stock", "Stock rules active"),
            r.add_gauge("claimguard_rules_claim", "Claim rules active"),
            r.gauge_family("claimguard_rules_info",
                           "The rules in use; the value is always 1 (version: the rules' hash, as in /rules and the "
                           "audit log)",
                           {"version", "default_mode"}),
        };
        return m;
    }
};

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

rules_reloader::rules_reloader(asio::io_context& io, engine::rules_holder& holder, std::vector<std::string> files,
                               std::string dir)
    : io_(io), holder_(holder), files_(std::move(files)), dir_(std::move(dir)), debounce_(io) {}

rules_reloader::~rules_reloader() {
    if (inotify_) {
        boost::system::error_code ignored;
        inotify_->close(ignored);
    }
}

std::pair<bool, std::string> rules_reloader::reload(std::string_view trigger) {
    auto& m = reload_metrics::get();
    auto paths = engine::rules_paths(files_, dir_);
    auto loaded = engine::load_rules_files(paths);
    if (paths.empty()) loaded.errors.push_back({{dir_, 0, 0}, "no rules files (*.yaml, *.yml) found"});
    if (!loaded.rules || paths.empty()) {
        std::string all;
        for (const auto& e : loaded.errors) {
            auto line = fmt::format("{}:{}:{}: {}", e.pos.file, e.pos.line, e.pos.column, e.message);
            spdlog::error("rules {} rejected: {}", trigger, line);
            all += line + "\n";
        }
        auto current = holder_.current();
        spdlog::error("rules {} failed: {} error(s); the previous rules (version {}) stay active", trigger,
                      loaded.errors.size(), current ? current->rules.version_hash : std::string("none"));
        m.last_successful.set(0);
        m.reloads.with("failure").inc();
        return {false, all};
    }
    std::vector<rules::match::code_object> code;
    std::vector<engine::rule_key_compare> keys;  // not asked (first load) or not reached: bytes until the check runs
    if (auto current = holder_.current(); current && vet_) {
        // The first load is checked by the schema watch once the proxy runs (readiness waits for it
        // in refuse mode); a reload is checked before it replaces rules that work.
        auto vetting = vet_(*loaded.rules, current->database_code);
        if (!vetting.accept) {
            std::string all;
            for (std::size_t at = 0; at < vetting.why.size();) {
                const auto nl = vetting.why.find('\n', at);
                const auto line = vetting.why.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
                spdlog::error("rules {} rejected by the schema check: {}", trigger, line);
                all += line + "\n";
                at = nl == std::string::npos ? vetting.why.size() : nl + 1;
            }
            spdlog::error(
                "rules {} failed: they name what the database lacks (schema_check: refuse); the previous "
                "rules (version {}) stay active",
                trigger, current->rules.version_hash);
            m.last_successful.set(0);
            m.reloads.with("failure").inc();
            return {false, all};
        }
        code = std::move(vetting.database_code);
        keys = std::move(vetting.key_compare);
    }
    auto snapshot =
        std::make_shared<engine::rules_snapshot>(std::move(*loaded.rules), std::move(code), std::move(keys));
    snapshot->files = paths;
    auto summary = fmt::format("rules {}: {} stock rules, {} claim rules (version {})", trigger,
                               snapshot->rules.stocks.size(), snapshot->rules.claims.size(),
                               snapshot->rules.version_hash);
    m.stock_rules.set(static_cast<std::int64_t>(snapshot->rules.stocks.size()));
    m.claim_rules.set(static_cast<std::int64_t>(snapshot->rules.claims.size()));
    m.info.clear();
    m.info
        .with(snapshot->rules.version_hash,
              snapshot->rules.default_mode == rules::mode::enforce ? "enforce" : "observe")
        .set(1);
    claim_counter_tables::get().install(snapshot);  // its rules' metric children, before sessions see it
    holder_.replace(std::move(snapshot));  // commands in flight keep the snapshot they started with
    loaded_at_ = unix_now();
    m.last_successful.set(1);
    m.last_success_time.set(loaded_at_);
    m.reloads.with("success").inc();
    spdlog::info("{}", summary);
    if (applied_) applied_();
    return {true, summary};
}

std::string rules_reloader::describe() const {
    auto current = holder_.current();
    nlohmann::json j;
    if (!current) {
        j["active"] = false;
        return j.dump();
    }
    j["active"] = true;
    j["version"] = current->rules.version_hash;
    j["files"] = current->files;
    j["loaded_at"] = loaded_at_;
    j["default_mode"] = current->rules.default_mode == rules::mode::enforce ? "enforce" : "observe";
    auto& stocks = j["stock_rules"] = nlohmann::json::array();
    for (const auto& s : current->rules.stocks) {
        // How the database compares each key column (empty: not known yet; byte for byte).
        auto key_compare = nlohmann::json::array();
        for (const auto k : s.key_compare) key_compare.push_back(engine::to_string(k));
        stocks.push_back({{"name", s.name},
                          {"table", s.table.schema.empty() ? s.table.name : s.table.schema + "." + s.table.name},
                          {"mode", current->rules.effective_mode(s) == rules::mode::enforce ? "enforce" : "observe"},
                          {"key_compare", std::move(key_compare)}});
    }
    auto& claims = j["claim_rules"] = nlohmann::json::array();
    for (const auto& c : current->rules.claims)
        claims.push_back({{"name", c.name}, {"table", c.table.schema.empty() ? c.table.name : c.table.schema + "." + c.table.name},
                          {"mode", current->rules.effective_mode(c) == rules::mode::enforce ? "enforce" : "observe"}});
    // What the schema check found reaching the rules' tables (statements reaching it get the policy).
    auto& code = j["database_code"] = nlohmann::json::array();
    for (const auto& o : current->database_code)
        code.push_back({{"kind", rules::match::to_string(o.kind)},
                        {"schema", o.schema},
                        {"name", o.name},
                        {"table", o.table},
                        {"rule", o.rule}});
    return j.dump(2);
}

void rules_reloader::watch() {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        spdlog::warn("cannot watch the rules files (inotify: {}); reload with SIGHUP or POST /-/reload",
                     std::strerror(errno));
        return;
    }
    std::set<std::string> dirs;
    if (!dir_.empty()) dirs.insert(dir_);
    for (const auto& f : files_) {
        auto parent = std::filesystem::path(f).parent_path().string();
        dirs.insert(parent.empty() ? "." : parent);
    }
    constexpr std::uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB;
    for (const auto& d : dirs) {
        if (::inotify_add_watch(fd, d.c_str(), mask) < 0)
            spdlog::warn("cannot watch {} for rules changes: {}", d, std::strerror(errno));
    }
    inotify_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    events_.resize(inotify_buffer_bytes);
    read_events();
}

void rules_reloader::read_events() {
    inotify_->async_read_some(asio::buffer(events_), [this](boost::system::error_code ec, std::size_t) {
        if (ec) return;  // closed at shutdown
        // Any change in a watched directory: coalesce, then reload (a reload with an
        // unchanged hash is harmless).
        debounce_.expires_after(reload_debounce);
        debounce_.async_wait([this](boost::system::error_code wait_ec) {
            if (!wait_ec) (void)reload("reload (file change)");
        });
        read_events();
    });
}

}  // namespace claimguard::session
