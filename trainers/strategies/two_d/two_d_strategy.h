#pragma once
// 2D parallelism (`--strategy 2d --tp M`): the world as a dp x tp device mesh (runtime's
// DeviceMesh) with the M ranks of a tensor-parallel group consecutive (inside a node, as the
// guide's chapter 7 lays them out) and dp = world / M. The model is split over each TP group by
// the parallel layers exactly as under --strategy tp, and each rank's slices are then held over
// the dp dimension by an existing data-parallel strategy:
//   default         FSDP (fsdp_strategy.h): each slice sharded along dim 0 over the dp group,
//                   so a rank holds 1/world of the sharded weights;
//   --dp-replicate  DDP (ddp_strategy.h): each slice replicated over the dp group, gradients
//                   all-reduced in buckets.
// Every rank of a TP group reads the same batch; the dp groups split the global batch. The
// global gradient norm counts each TP shard once and each replicated parameter once.
#include <memory>

#include "strategies/strategy.h"

namespace ddx::train {

// FSDP over the dp dimension with `fsdp`, or DDP when dims.dp_replicate.
std::unique_ptr<Strategy> make_two_d_strategy(const FsdpOptions& fsdp, const ParallelDims& dims);

}  // namespace ddx::train
