// Rules reloads and the inotify watcher.
#include "rules_reloader.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
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
    admin::gauge& mode_override;
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
            r.add_gauge("claimguard_mode_override",
                        "1 while the mode override (the kill switch) makes every rule observe, whatever the rules "
                        "files say"),
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
    if (!loaded.rules) {
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
    loaded.rules->observe_override = observe_override_;
    auto snapshot =
        std::make_shared<engine::rules_snapshot>(std::move(*loaded.rules), std::move(code), std::move(keys));
    snapshot->files = paths;
    auto summary = fmt::format("rules {}: {} stock rules, {} claim rules (version {}){}", trigger,
                               snapshot->rules.stocks.size(), snapshot->rules.claims.size(),
                               snapshot->rules.version_hash,
                               paths.empty() ? "; no rules files: every statement is relayed unchanged"
                               : observe_override_ ? "; mode override: every rule observes"
                                                   : "");
    publish(std::move(snapshot));
    loaded_at_ = unix_now();
    m.last_successful.set(1);
    m.last_success_time.set(loaded_at_);
    m.reloads.with("success").inc();
    if (paths.empty()) spdlog::warn("{}", summary);
    else spdlog::info("{}", summary);
    if (applied_) applied_();
    return {true, summary};
}

void rules_reloader::publish(std::shared_ptr<engine::rules_snapshot> snapshot) {
    auto& m = reload_metrics::get();
    m.stock_rules.set(static_cast<std::int64_t>(snapshot->rules.stocks.size()));
    m.claim_rules.set(static_cast<std::int64_t>(snapshot->rules.claims.size()));
    m.info.clear();
    m.info
        .with(snapshot->rules.version_hash,
              snapshot->rules.default_mode == rules::mode::enforce ? "enforce" : "observe")
        .set(1);
    claim_counter_tables::get().install(snapshot);  // its rules' metric children, before sessions see it
    m.mode_override.set(snapshot->rules.observe_override ? 1 : 0);
    holder_.replace(std::move(snapshot));  // commands in flight keep the snapshot they started with
}

bool rules_reloader::set_observe_override(bool on, std::string_view trigger) {
    if (on == observe_override_) return false;
    observe_override_ = on;
    if (auto current = holder_.current()) {
        rules::rule_set next = current->rules;
        next.observe_override = on;
        auto snapshot = std::make_shared<engine::rules_snapshot>(std::move(next), current->database_code,
                                                                 current->key_compare);
        snapshot->files = current->files;
        publish(std::move(snapshot));
    }
    if (on)
        spdlog::warn("mode override ({}): every rule observes (statements are forwarded as written, audited "
                     "and counted); the rules files are unchanged",
                     trigger);
    else
        spdlog::warn("mode override ({}) lifted: the rules files' modes apply again", trigger);
    return true;
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
    j["mode_override"] = current->rules.observe_override ? nlohmann::json("observe") : nlohmann::json();
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

bool rules_reloader::concerns_rules(std::string_view name) const {
    if (name == "..data") return true;  // a ConfigMap update: kubelet swaps this symlink in one rename
    for (const auto& f : files_)
        if (std::filesystem::path(f).filename() == name) return true;
    // What rules_paths() reads from the directory: *.yaml and *.yml, hidden entries skipped.
    if (dir_.empty() || name.empty() || name.front() == '.') return false;
    return name.ends_with(".yaml") || name.ends_with(".yml");
}

void rules_reloader::read_events() {
    inotify_->async_read_some(asio::buffer(events_), [this](boost::system::error_code ec, std::size_t n) {
        if (ec) return;  // closed at shutdown
        // inotify delivers whole events: walk them, reload only for a file that can change the rules.
        bool relevant = false;
        for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
            inotify_event head{};
            std::memcpy(&head, events_.data() + at, sizeof head);
            const auto* name = events_.data() + at + sizeof head;
            const std::string_view file(name, ::strnlen(name, head.len));
            if ((head.mask & IN_Q_OVERFLOW) != 0 || concerns_rules(file)) relevant = true;
            at += sizeof head + head.len;
        }
        if (relevant) {
            // Editors and kubelet write in several steps: coalesce, then reload (a reload of
            // unchanged files is harmless).
            debounce_.expires_after(reload_debounce);
            debounce_.async_wait([this](boost::system::error_code wait_ec) {
                if (!wait_ec) (void)reload("reload (file change)");
            });
        }
        read_events();
    });
}

}  // namespace claimguard::session
