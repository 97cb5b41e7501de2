#include "bandwidth/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ddx::bw {
namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(double timeout_s, std::string who) : timeout_s_(timeout_s), who_(std::move(who)) {
  last_pet_ns_ = now_ns();
  phase_ = "start-up";
  if (timeout_s_ > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::phase(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    phase_ = what;
  }
  pet();
}

void Watchdog::pet() { last_pet_ns_.store(now_ns(), std::memory_order_relaxed); }

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const long long limit_ns = static_cast<long long>(timeout_s_ * 1e9);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_) return;
    if (now_ns() - last_pet_ns_.load(std::memory_order_relaxed) < limit_ns) continue;
    // One line on stderr, written at once, then exit: the op that hangs cannot be cancelled.
    char line[1024];
    const int n = std::snprintf(line, sizeof(line),
                                "ddx: error: %s: probe bandwidth made no progress for %g s (-T/--timeout) "
                                "during %s; a peer rank died or hangs\n",
                                who_.c_str(), timeout_s_, phase_.c_str());
    if (n > 0) {
      ssize_t ignored = ::write(STDERR_FILENO, line, static_cast<size_t>(std::min(n, 1023)));
      (void)ignored;
    }
    ::_exit(kExitTimeout);
  }
}

}  // namespace ddx::bw
