#pragma once
// Internal: who hosts the job's rendezvous store, and what its loss looks like to this rank.
// Under ddx launch, an MPI launcher or plain MASTER_ADDR/MASTER_PORT, rank 0's process hosts a
// TCPStore server; under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent does, and every
// rank is a client of it.
#include <string>

#include "ddx/rendezvous/rendezvous.h"

namespace ddx::detail {

// Whether torchrun's agent hosts the store this rank joins (then rank 0 is a client too).
bool agent_hosts_store(const RendezvousInfo& info);

// The job's store as its loss is reported: `description` is "the rendezvous store at
// 127.0.0.1:29500 (hosted by rank 0)", or "(hosted by the torchrun agent)", the subject of every
// store-loss message; `host_rank` is 0, or -1 for the agent.
struct StoreIdentity {
  std::string description;
  int host_rank = 0;
};
StoreIdentity store_identity(const RendezvousInfo& info);

// Call inside a catch block around a store operation. A connection that broke (c10's
// DistNetworkError for a closed, reset or refused connection; never a timeout, which a slow
// store may recover from) is rethrown as ddx::StoreLost naming `store`, with c10's multi-line
// message and its C++ stack reduced to the cause; anything else is rethrown unchanged. The first
// loss a process sees is also recorded as the job event "store.unreachable" (ddx/watchdog/job_events.h).
[[noreturn]] void rethrow_store_failure(const StoreIdentity& store);

// While one exists, c10 logs errors only. c10d's TCPStore client logs a WARNING with the raw C++
// stack of every send that fails before it throws; ddx says what failed itself (StoreLost, or the
// watchdog's "store unreachable" line), so its own store operations run under one of these.
// Nested and concurrent ones are fine: the level comes back when the last one ends.
class QuietStoreLogs {
 public:
  QuietStoreLogs();
  ~QuietStoreLogs();
  QuietStoreLogs(const QuietStoreLogs&) = delete;
  QuietStoreLogs& operator=(const QuietStoreLogs&) = delete;
};

}  // namespace ddx::detail
