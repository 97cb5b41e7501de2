#include "strategies/parallel_dims.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "ddx/errors/errors.h"

namespace ddx::train {

void add_tp_degree_flag(CLI::App& cmd, LayoutFlags& f) {
  cmd.add_option("--tp", f.tp, "Tensor-parallel ranks (tp: default the world size; 2d: required, consecutive ranks; pp: per stage, default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->group("Tensor parallel (tp)");
}

void add_dp_replicate_flag(CLI::App& cmd, LayoutFlags& f) {
  cmd.add_flag("--dp-replicate", f.dp_replicate,
               "2d, pp: replicate each TP slice (DDP) or pipeline stage over the data-parallel ranks instead of sharding it (FSDP)")
      ->group("Tensor parallel (tp)");
}

void add_pp_degree_flag(CLI::App& cmd, LayoutFlags& f) {
  cmd.add_option("--pp", f.pp, "Pipeline ranks (default: the world size / --tp); FSDP shards each stage over the rest (--dp-replicate: replicas)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->group("Pipeline parallel (pp)");
}

namespace {

// The degrees each layout takes from the flags, before anything is checked against the world.
ParallelDims degrees_of(Layout layout, const LayoutFlags& f, int world) {
  ParallelDims d;
  d.world = world;
  switch (layout) {
    case Layout::DataParallel:
      break;
    case Layout::TensorParallel:
      d.tp = f.tp > 0 ? static_cast<int>(f.tp) : world;
      if (d.tp != world) {
        throw UsageError("--tp " + std::to_string(d.tp) + " does not match the world size " + std::to_string(world) +
                         ": --strategy tp puts every rank in one tensor-parallel group (--strategy 2d adds data parallelism)");
      }
      break;
    case Layout::TwoD:
      if (f.tp <= 0) {
        throw UsageError("--strategy 2d needs --tp M: the ranks of each tensor-parallel group (data parallelism over world / M)");
      }
      d.tp = static_cast<int>(f.tp);
      d.dp_replicate = f.dp_replicate;
      break;
    case Layout::Pipeline: {
      const int tp = f.tp > 0 ? static_cast<int>(f.tp) : 1;
      d.pp = f.pp > 0 ? static_cast<int>(f.pp) : std::max(1, world / tp);
      d.tp = tp > 1 ? tp : 0;  // --tp 1: no tensor-parallel dimension
      d.dp_replicate = f.dp_replicate;
      break;
    }
  }
  return d;
}

}  // namespace

ParallelDims resolve_parallel_dims(Layout layout, const LayoutFlags& flags, bool sequence_parallel, int world) {
  ParallelDims d = degrees_of(layout, flags, world);
  d.sequence_parallel = sequence_parallel;
  // The one check that the dimensions divide the world, in the flags' own words.
  const int pp = d.pp > 0 ? d.pp : 1, tp = d.tp > 0 ? d.tp : 1;
  const std::string w = std::to_string(world);
  if (d.pp > 0 && world % pp != 0) throw UsageError("--pp " + std::to_string(pp) + " does not divide the world size " + w);
  if (world % (pp * tp) != 0) {
    if (d.pp > 0) {
      throw UsageError("--pp " + std::to_string(pp) + " x --tp " + std::to_string(tp) + " = " + std::to_string(pp * tp) +
                       " does not divide the world size " + w);
    }
    throw UsageError("--tp " + std::to_string(tp) + " does not divide the world size " + w +
                     (layout == Layout::TwoD ? ": --strategy 2d needs world = dp x tp" : ""));
  }
  return d;
}

}  // namespace ddx::train
