#pragma once
// The job's rendezvous store went away under a running job: its host (rank 0's TCPStore server
// under ddx launch, the agent under torchrun) died or dropped the connections. A TCPStore client
// never reconnects, so from then on every store operation of this process fails: heartbeats,
// dump requests, the check-out at the end of a run. Whoever sees it first says so in one line
// (never c10d's multi-line message and stack) and the run fails, so a job whose store is gone
// can never finish looking clean. No LibTorch here: the watchdog (ddx_core) catches it; ddx_dist
// throws it (store_failure.h).
#include <chrono>
#include <stdexcept>
#include <string>

namespace ddx {

class StoreLost : public std::runtime_error {
 public:
  using Clock = std::chrono::system_clock;
  // `store`: "the rendezvous store at 127.0.0.1:29500 (hosted by rank 0)" (see
  // store_host.h: store_identity); `cause`: "the store closed the connection". what() is
  // line(store, cause, since).
  StoreLost(std::string store, std::string cause, Clock::time_point since = Clock::now());
  const std::string& store() const { return store_; }
  const std::string& cause() const { return cause_; }

  // "<store> is unreachable since 14:02:11.123 (<cause>)", local time as log lines show it.
  static std::string line(const std::string& store, const std::string& cause, Clock::time_point since);

 private:
  std::string store_;
  std::string cause_;
};

}  // namespace ddx
