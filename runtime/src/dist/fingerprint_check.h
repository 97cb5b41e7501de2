#pragma once
// Internal: --check-collectives. Before each collective every member publishes the op's
// fingerprint (op, reduce op, dtype, shape, root; keyed by group and sequence number) in the
// store and compares it with everyone else's, so a mismatch fails at once on every rank with
// both sides printed, instead of hanging (what TORCH_DISTRIBUTED_DEBUG=DETAIL promises).
// Point-to-point ops are not checked (like PyTorch's check).
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "ddx/collectives.h"
#include "store_host.h"

namespace ddx::detail {

// The part of an op that must agree across the group: "all_reduce(sum) float32 [1024]".
std::string op_fingerprint(const OpRecord& record);

// A CollectiveHook; register with add_collective_hook. Uses its own client of `store` whose
// get() gives up after `timeout` (a rank that never arrives is named, not waited for forever).
// A broken store connection fails the op with the store's one line (store_host.h), naming
// `store_id` (store_host.h: store_identity), not a peer.
std::unique_ptr<CollectiveHook> make_fingerprint_check(c10d::Store& store, int global_rank,
                                                       std::chrono::milliseconds timeout,
                                                       const StoreIdentity& store_id);

}  // namespace ddx::detail
