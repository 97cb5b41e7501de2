#pragma once
// The degree of every parallel dimension of a run, resolved and checked once, from the layout
// flags and the world size, before any strategy is built (torchtitan's ParallelDims). The
// strategies, the mesh builder (parallel_mesh.h) and the registry's choice between variants of
// one strategy all read the degrees from here; none works them out again. No LibTorch.
#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace ddx::train {

// The flags that size the layout, as typed (0: not given).
struct LayoutFlags {
  int64_t tp = 0;            // tensor-parallel ranks
  int64_t pp = 0;            // pipeline ranks
  bool dp_replicate = false; // 2d, pp: replicas (DDP) on the data-parallel dimension instead of FSDP shards
};

// Adds --tp, --dp-replicate and --pp to `ddx train`, each with its help group (in the order
// --help shows them: --tp and --dp-replicate with tensor parallelism, --pp with the pipeline).
void add_tp_degree_flag(CLI::App& cmd, LayoutFlags& flags);
void add_dp_replicate_flag(CLI::App& cmd, LayoutFlags& flags);
void add_pp_degree_flag(CLI::App& cmd, LayoutFlags& flags);

// The layouts the strategies have: which dimensions exist and what a missing --tp or --pp means.
enum class Layout {
  DataParallel,    // single, ddp, fsdp: one data-parallel dimension, the world
  TensorParallel,  // tp: one tensor-parallel group of every rank (--tp defaults to, and must be, the world)
  TwoD,            // 2d: --tp consecutive ranks (required) x data parallelism over the rest
  Pipeline,        // pp: --pp stages (default world / --tp) x data parallelism x --tp (default 1)
};

// The world as pp x dp x tp, outermost first.
struct ParallelDims {
  int world = 1;
  int pp = 0;                      // pipeline ranks; 0: no pipeline dimension
  int tp = 0;                      // tensor-parallel ranks; 0: no tensor-parallel dimension
  bool dp_replicate = false;       // the data-parallel dimension holds replicas, not FSDP shards
  bool sequence_parallel = false;  // the sequence is split over tp too (--sequence-parallel)

  // The data-parallel ranks: the world divided by the other dimensions.
  int dp() const { return world / ((pp > 0 ? pp : 1) * (tp > 0 ? tp : 1)); }
};

// The dimensions of `layout` on `world_size` ranks, after one-line UsageErrors for a degree the
// layout requires and does not have, or that does not divide the world.
ParallelDims resolve_parallel_dims(Layout layout, const LayoutFlags& flags, bool sequence_parallel, int world_size);

}  // namespace ddx::train
