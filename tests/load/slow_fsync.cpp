// claimguard-slow-fsync: an LD_PRELOAD shim that makes every fsync and fdatasync of the process that
// loads it take CLAIMGUARD_FSYNC_DELAY_US microseconds longer (default 1000), to stand for storage that
// flushes slower than this machine's disk (network block storage: 0.5-1 ms per flush). The flash benchmark
// (scripts/bench_flash.py --fsync-delay-us) loads it into MariaDB only. The real call runs first, then the
// delay: the data is as durable as without the shim, only later acknowledged.
#include <dlfcn.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>

namespace {

using sync_fn = int (*)(int);

long delay_us() {
    static const long value = [] {
        const char* text = std::getenv("CLAIMGUARD_FSYNC_DELAY_US");
        if (text == nullptr || *text == '\0') return 1000L;
        char* end = nullptr;
        const long v = std::strtol(text, &end, 10);
        return (end != nullptr && *end == '\0' && v >= 0) ? v : 1000L;
    }();
    return value;
}

void wait_delay() {
    const long us = delay_us();
    timespec left{us / 1000000, (us % 1000000) * 1000};
    const int saved = errno;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    errno = saved;
}

int delayed(const char* name, int fd) {
    // RTLD_NEXT: the libc function this shim stands in front of.
    auto real = reinterpret_cast<sync_fn>(dlsym(RTLD_NEXT, name));
    if (real == nullptr) {
        errno = ENOSYS;
        return -1;
    }
    const int rc = real(fd);
    wait_delay();
    return rc;
}

}  // namespace

extern "C" int fsync(int fd) { return delayed("fsync", fd); }
extern "C" int fdatasync(int fd) { return delayed("fdatasync", fd); }
