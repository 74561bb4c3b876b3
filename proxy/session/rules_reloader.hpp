// Rules reload without a restart: on SIGHUP, POST /-/reload and file changes (inotify on
// the directories, so a Kubernetes ConfigMap's ..data symlink swap is seen). The whole new
// file set is validated before one atomic swap; a bad file keeps the old rules running.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proxy/engine/rules_snapshot.hpp"

namespace claimguard::session {

class rules_reloader {
public:
    rules_reloader(boost::asio::io_context& io, engine::rules_holder& holder, std::vector<std::string> files,
                   std::string dir);
    ~rules_reloader();

    // Loads the rules (start-up or reload). {true, summary} or {false, every error}.
    std::pair<bool, std::string> reload(std::string_view trigger);
    // Starts watching the files' directories; changes trigger a reload after a short debounce.
    void watch();
    // The active rules for GET /rules (JSON).
    [[nodiscard]] std::string describe() const;

private:
    void read_events();

    boost::asio::io_context& io_;
    engine::rules_holder& holder_;
    std::vector<std::string> files_;
    std::string dir_;
    std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;
    boost::asio::steady_timer debounce_;
    std::vector<char> events_;
    std::int64_t loaded_at_ = 0;  // unix seconds of the last successful load
};

}  // namespace claimguard::session
