// A private redis-server for one test: a free 127.0.0.1 port, a temp dir, extra config lines;
// stopped (SIGKILL) by the destructor. Plus a blocking hiredis client to look at its keys.
#pragma once

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace claimguard::test {

inline std::uint16_t any_free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

// A cluster node also listens on port + 10000 (its bus): ask for a port low enough for that.
constexpr std::uint16_t max_cluster_port = 55535;

inline std::uint16_t free_port(std::uint16_t below = 65535) {
    for (;;) {
        auto p = any_free_port();
        if (p < below) return p;
    }
}

class redis_server {
public:
    // `config`: extra redis.conf lines. `tls`: the port is a tls-port (the config must name the files).
    explicit redis_server(const std::string& config = {}, bool tls = false)
        : port_(free_port(config.find("cluster-enabled yes") != std::string::npos ? max_cluster_port : 65535)) {
        dir_ = std::filesystem::temp_directory_path() / ("cg-redis-" + std::to_string(::getpid()) + "-" +
                                                        std::to_string(port_));
        std::filesystem::create_directories(dir_);
        auto conf = dir_ / "redis.conf";
        std::ofstream(conf) << "bind 127.0.0.1\nsave \"\"\nappendonly no\ndir " << dir_.string() << "\n"
                            << (tls ? "port 0\ntls-port " : "port ") << port_ << "\n"
                            << config << "\n";
        pid_ = ::fork();
        if (pid_ == 0) {
            auto log = (dir_ / "redis.log").string();
            if (!std::freopen(log.c_str(), "w", stdout)) _exit(126);
            ::dup2(::fileno(stdout), 2);
            ::execlp("redis-server", "redis-server", conf.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
            int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(port_);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
            ::close(fd);
            if (up) return;
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        throw std::runtime_error("redis-server did not start; see " + (dir_ / "redis.log").string());
    }
    ~redis_server() {
        stop();
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGCONT);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    void pause() { ::kill(pid_, SIGSTOP); }
    void resume() { ::kill(pid_, SIGCONT); }

    [[nodiscard]] std::uint16_t port() const { return port_; }
    [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

    // One command over plain TCP as the admin (optionally after AUTH); the reply as text.
    std::string command(const std::vector<std::string>& args, const std::string& auth_password = {}) const {
        redisContext* c = redisConnect("127.0.0.1", port_);
        if (!c || c->err) {
            if (c) redisFree(c);
            return "(no connection)";
        }
        if (!auth_password.empty()) freeReplyObject(redisCommand(c, "AUTH %s", auth_password.c_str()));
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        for (const auto& a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
        std::string out = "(null)";
        if (r) {
            if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
            else if (r->type == REDIS_REPLY_NIL) out = "(nil)";
            else if (r->str) out.assign(r->str, r->len);
            else out = "(array)";
            freeReplyObject(r);
        }
        redisFree(c);
        return out;
    }

private:
    std::uint16_t port_;
    std::filesystem::path dir_;
    pid_t pid_ = -1;
};

}  // namespace claimguard::test
