#pragma once
// Where every strategy's ranks become process groups: the world as pp x dp x tp, outermost
// first. Tensor parallelism is innermost, so a TP group is consecutive ranks (inside a node,
// where its per-layer collectives need the fastest links); the pipeline is outermost (its
// point-to-point sends tolerate the slowest); data parallelism takes the ranks left. This is
// Megatron's 3D layout and the guide's chapter 7 (parallelism.md).
//
// The dimensions come resolved and checked (parallel_dims.h: they divide the world) in the
// strategy's context; build_parallel_mesh() checks what the model must allow (it splits over
// --tp) and creates the groups: a collective, called once by every rank in the same order.
#include <string>

#include "strategies/strategy.h"

namespace ddx::train {

struct ParallelMesh {
  Group* world = nullptr;
  Group* dp = nullptr;  // the ranks holding the same part of the model; the world without a mesh
  Group* tp = nullptr;  // nullptr without a tensor-parallel dimension
  Group* pp = nullptr;  // nullptr without a pipeline dimension
  int dp_rank = 0;      // this rank's coordinate along dp: which slice of the global batch it reads
  int dp_size = 1;
  DeviceMesh* mesh = nullptr;  // nullptr when the layout is data parallel over the world

  // "pp=2 x dp=2 x tp=2; this rank: pp 0, dp 1, tp 1", or "dp=4 (the world)".
  std::string describe() const;
};

// One-line UsageErrors for head counts (query or KV) that `tp` does not divide, and a sequence
// that --sequence-parallel cannot split.
void check_tp_fits_model(const StrategyContext& context, int tp);

// The groups of context.dims over context.world, after one-line UsageErrors for a --tp the model
// cannot take.
ParallelMesh build_parallel_mesh(const StrategyContext& context);

}  // namespace ddx::train
