#pragma once
// A read-only client of a running job's store (the TCPStore rank 0 hosts): what `ddx top`
// reads the ranks' heartbeats through. It only reads (check/get), never sets or adds a key and
// never registers as a worker, so watching a job cannot change it. Implemented in ddx_dist
// over the watchdog's own heartbeat reader; no LibTorch in this header.
#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace ddx {

class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  // rank -> heartbeat JSON (see heartbeat_payload in ddx/watchdog/watchdog.h) for the ranks below
  // `world_size` that have published one. Throws std::runtime_error when the store is gone.
  virtual std::map<int, std::string> read_heartbeats(int world_size) = 0;
};

// Connects to host:port, giving up after `timeout` (std::runtime_error naming the endpoint).
std::unique_ptr<StoreObserver> observe_job_store(const std::string& host, int port,
                                                 std::chrono::milliseconds timeout);

}  // namespace ddx
