#pragma once
// Internal: the watchdog's PeerChannel over a TCPStore client of its own (a clone of the
// world's store with a short timeout), so a training thread blocked in the store cannot block
// the heartbeat, and a dead store costs the heartbeat thread a few seconds at most.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "ddx/watchdog/watchdog.h"
#include "store_host.h"

namespace ddx::detail {

// nullptr when the store cannot be cloned (a single-process HashStore). A broken connection
// surfaces as ddx::StoreLost naming `store` (store_host.h: store_identity).
std::unique_ptr<PeerChannel> make_store_peer_channel(c10d::Store& store, std::chrono::milliseconds timeout,
                                                     const StoreIdentity& store_id);

}  // namespace ddx::detail
