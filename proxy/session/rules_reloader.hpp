// Rules reload without a restart: on SIGHUP, POST /-/reload and file changes (inotify on
// the directories, so a Kubernetes ConfigMap's ..data symlink swap is seen). The whole new
// file set is validated before one atomic swap; a bad file keeps the old rules running.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proxy/engine/rules_snapshot.hpp"

namespace claimguard::session {

// What the schema check says about rules a reload is about to apply.
struct rules_vetting {
    bool accept = true;
    std::string why;                                       // rejected: the errors, one per line
    std::vector<rules::match::code_object> database_code;  // for the new snapshot
    std::vector<engine::rule_key_compare> key_compare;     // ... and how its key columns compare (empty: bytes)
};

// Asks the database about the next rules; `previous` is the current snapshot's database code.
using rules_vetter =
    std::function<rules_vetting(const rules::rule_set& next, const std::vector<rules::match::code_object>& previous)>;

class rules_reloader {
public:
    rules_reloader(boost::asio::io_context& io, engine::rules_holder& holder, std::vector<std::string> files,
                   std::string dir);
    ~rules_reloader();

    // Loads the rules (start-up or reload). {true, summary} or {false, every error}.
    std::pair<bool, std::string> reload(std::string_view trigger);
    // The kill switch: with `on`, every rule observes whatever the files say, from the next command
    // on (a new snapshot of the same rules); off, the files' modes again. Kept across reloads.
    // False when nothing changed.
    bool set_observe_override(bool on, std::string_view trigger);
    [[nodiscard]] bool observe_override() const { return observe_override_; }
    // Starts watching the files' directories; changes trigger a reload after a short debounce.
    void watch();
    // The active rules for GET /rules (JSON).
    [[nodiscard]] std::string describe() const;
    // Reloads (not the first load) ask `vet` before the swap, and call `applied` after it.
    void set_schema_hooks(rules_vetter vet, std::function<void()> applied) {
        vet_ = std::move(vet);
        applied_ = std::move(applied);
    }

private:
    void read_events();
    // Whether an inotify event's file name can change the rules (a rules file, a named file, a
    // ConfigMap's ..data swap): editors' swap files and unrelated files do not reload.
    [[nodiscard]] bool concerns_rules(std::string_view name) const;
    // Installs `next` (metrics, counters, the holder) and logs `summary`.
    void publish(std::shared_ptr<engine::rules_snapshot> next);

    boost::asio::io_context& io_;
    engine::rules_holder& holder_;
    std::vector<std::string> files_;
    std::string dir_;
    std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;
    boost::asio::steady_timer debounce_;
    std::vector<char> events_;
    std::int64_t loaded_at_ = 0;  // unix seconds of the last successful load
    rules_vetter vet_;
    std::function<void()> applied_;
    bool observe_override_ = false;
};

}  // namespace claimguard::session
