// The control client: one HTTP/1.1 POST over a blocking socket with poll() deadlines. IPv4, IPv6
// ([::1]:9091) and host names (getaddrinfo), one deadline for it all. Plain sockets on purpose: the
// client sends one fixed request and reads one small answer, and Beast's HTTP client cost half a
// minute of every build of this file.
#include "proxy/control_client.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "proxy/config/proxy_options.hpp"

namespace claimguard {
namespace {

using clock_type = std::chrono::steady_clock;

// The largest answer read: the control endpoint's bodies are a line or two.
constexpr std::size_t max_answer_bytes = 64 * 1024;

class fd_guard {
public:
    explicit fd_guard(int fd) : fd_(fd) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard() {
        if (fd_ >= 0) ::close(fd_);
    }
    [[nodiscard]] int get() const { return fd_; }

private:
    int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes: "" or the reason it cannot go on.
std::string wait_for(int fd, short events, clock_type::time_point deadline) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
        if (left.count() <= 0) return "timed out";
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n > 0) return {};
        if (n < 0 && errno != EINTR) return std::strerror(errno);
    }
}

// Connects to the first address of `ep` that answers before the deadline.
std::string connect_to(const config::endpoint& ep, clock_type::time_point deadline, int& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &found);
    if (rc != 0) return ::gai_strerror(rc);
    std::string why = "no address";
    for (auto* a = found; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            why = std::strerror(errno);
            continue;
        }
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            why = std::strerror(errno);
            ::close(fd);
            continue;
        }
        why = wait_for(fd, POLLOUT, deadline);
        int error = 0;
        socklen_t len = sizeof error;
        if (why.empty() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error != 0)
            why = std::strerror(error);
        if (why.empty()) {
            out = fd;
            break;
        }
        ::close(fd);
    }
    ::freeaddrinfo(found);
    return why;
}

// Sends the request and reads the answer until the server closes (Connection: close).
std::string exchange(int fd, const std::string& request, clock_type::time_point deadline, std::string& answer) {
    for (std::size_t sent = 0; sent < request.size();) {
        if (auto why = wait_for(fd, POLLOUT, deadline); !why.empty()) return why;
        const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return std::strerror(errno);
        if (n > 0) sent += static_cast<std::size_t>(n);
    }
    char buffer[4096];
    for (;;) {
        if (auto why = wait_for(fd, POLLIN, deadline); !why.empty()) return why;
        const auto n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n == 0) return {};
        if (n < 0 && errno != EAGAIN && errno != EINTR) return std::strerror(errno);
        if (n > 0) answer.append(buffer, static_cast<std::size_t>(n));
        if (answer.size() > max_answer_bytes) return "the answer is larger than 64 KiB";
    }
}

struct http_answer {
    int status = 0;
    std::string reason;
    std::string body;
};

// "HTTP/1.1 200 OK\r\n<headers>\r\n\r\n<body>" (the control endpoint closes after one answer, so the
// body is the rest; a chunked body is not expected from it).
bool parse_answer(const std::string& text, http_answer& out) {
    const auto line_end = text.find("\r\n");
    const auto head_end = text.find("\r\n\r\n");
    if (line_end == std::string::npos || head_end == std::string::npos || !text.starts_with("HTTP/1.")) return false;
    const auto first = text.find(' ');
    if (first == std::string::npos || first + 4 > line_end) return false;
    const auto code = text.substr(first + 1, 3);
    if (code.find_first_not_of("0123456789") != std::string::npos) return false;
    out.status = std::stoi(code);
    out.reason = first + 5 <= line_end ? text.substr(first + 5, line_end - first - 5) : "";
    out.body = text.substr(head_end + 4);
    return true;
}

}  // namespace

int control_post(std::string_view command, const std::string& address, std::string_view path,
                 std::chrono::milliseconds timeout, std::ostream& out, std::ostream& err, std::string_view said) {
    config::endpoint ep;
    try {
        ep = config::parse_endpoint(address);
    } catch (const std::exception& e) {
        err << "claimguard " << command << ": " << e.what() << "\n";
        return 2;
    }
    const auto deadline = clock_type::now() + timeout;
    const auto unreachable = [&](const std::string& why) {
        err << "claimguard " << command << ": cannot reach the control endpoint at " << address << ": " << why << "\n";
        return 1;
    };
    int fd = -1;
    if (auto why = connect_to(ep, deadline, fd); !why.empty()) return unreachable(why);
    fd_guard socket(fd);
    const bool v6 = ep.host.find(':') != std::string::npos;
    const std::string request = "POST " + std::string(path) +
                                " HTTP/1.1\r\nHost: " + (v6 ? "[" + ep.host + "]" : ep.host) + ":" +
                                std::to_string(ep.port) + "\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    std::string text;
    if (auto why = exchange(socket.get(), request, deadline, text); !why.empty()) return unreachable(why);
    http_answer answer;
    if (!parse_answer(text, answer)) return unreachable("the answer is not HTTP");
    if (answer.status == 200) {
        out << (said.empty() ? std::string_view(answer.body) : said) << "\n";
        return 0;
    }
    err << "claimguard " << command << ": " << address << " answered " << answer.status << " " << answer.reason << ": "
        << answer.body << "\n";
    return 1;
}

}  // namespace claimguard
