#pragma once
// -T/--timeout: a rank that dies or hangs must end the probe with a clear line, not a silent
// hang. The loop pets the watchdog before and after every op; when nothing moves for the
// timeout, a background thread prints what this rank was doing and exits the process (a hung
// collective cannot be unwound from another thread). nccl-tests checks only at stream syncs and
// never during init; this covers every phase, communicator set-up included.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ddx::bw {

constexpr int kExitTimeout = 3;

class Watchdog {
 public:
  // `who` prefixes the message ("host vm rank 1"); timeout 0 disables.
  Watchdog(double timeout_s, std::string who);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // What this rank is doing now, e.g. "all_reduce float sum 1048576 B out-of-place".
  void phase(const std::string& what);
  // Progress: restarts the clock.
  void pet();

 private:
  void run();

  double timeout_s_;
  std::string who_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  std::string phase_;
  std::atomic<long long> last_pet_ns_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddx::bw
