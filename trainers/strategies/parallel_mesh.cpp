#include "strategies/parallel_mesh.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "ddx/errors/errors.h"

namespace ddx::train {

void check_tp_fits_model(const StrategyContext& c, int tp) {
  const auto& m = c.model;
  const std::string n = std::to_string(tp);
  if (m.num_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_heads) + " query heads of model " +
                     m.name);
  }
  if (m.num_kv_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_kv_heads) + " KV heads of model " +
                     m.name);
  }
  if (c.dims.sequence_parallel && c.run.seq_length % tp != 0) {
    throw UsageError("--sequence-parallel: -s " + std::to_string(c.run.seq_length) + " does not split over --tp " + n);
  }
}

std::string ParallelMesh::describe() const {
  if (mesh != nullptr) return mesh->describe();
  return "dp=" + std::to_string(dp_size) + " (the world)";
}

ParallelMesh build_parallel_mesh(const StrategyContext& c) {
  const ParallelDims& plan = c.dims;
  const int world = c.world.size();
  if (plan.world != world) {
    throw std::logic_error("parallel dimensions resolved for " + std::to_string(plan.world) + " ranks, world has " +
                           std::to_string(world));
  }
  const int pp = plan.pp > 0 ? plan.pp : 1, tp = plan.tp > 0 ? plan.tp : 1;
  if (plan.tp > 0) check_tp_fits_model(c, tp);

  ParallelMesh out;
  out.world = &c.world.world();
  if (plan.pp <= 0 && plan.tp <= 0) {  // data parallel over the whole world: no mesh to build
    out.dp = out.world;
    out.dp_rank = c.world.rank();
    out.dp_size = world;
    return out;
  }
  std::vector<std::pair<std::string, int>> dims;
  if (plan.pp > 0) dims.emplace_back("pp", pp);
  dims.emplace_back("dp", plan.dp());
  if (plan.tp > 0) dims.emplace_back("tp", tp);
  out.mesh = &c.world.mesh(dims);
  out.dp = &out.mesh->group("dp");
  out.dp_rank = out.mesh->coordinate("dp");
  out.dp_size = out.mesh->size("dp");
  if (plan.tp > 0) out.tp = &out.mesh->group("tp");
  if (plan.pp > 0) out.pp = &out.mesh->group("pp");
  return out;
}

}  // namespace ddx::train
