#include "checkpoint/shard_layout.h"

#include <algorithm>
#include <stdexcept>

namespace ddx::train {

int64_t rows_per_rank(int64_t rows, int world_size) { return (rows + world_size - 1) / world_size; }

int64_t ShardedParameter::row_begin(int rank) const { return std::min(rank * rows_per_rank, rows); }
int64_t ShardedParameter::row_end(int rank) const { return std::min((rank + 1) * rows_per_rank, rows); }

UnitLayout make_unit_layout(std::string name, const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters,
                            int world_size) {
  if (world_size < 1) throw std::invalid_argument("make_unit_layout: world size " + std::to_string(world_size));
  UnitLayout unit;
  unit.name = std::move(name);
  unit.world_size = world_size;
  for (const auto& [pname, shape] : parameters) {
    if (shape.empty()) throw std::invalid_argument("FSDP cannot shard scalar parameter '" + pname + "' along dim 0");
    ShardedParameter p;
    p.name = pname;
    p.shape = shape;
    p.rows = shape[0];
    for (size_t d = 1; d < shape.size(); ++d) p.row_numel *= shape[d];
    p.rows_per_rank = rows_per_rank(p.rows, world_size);
    p.shard_offset = unit.shard_numel;
    p.full_offset = unit.full_numel;
    unit.shard_numel += p.shard_numel();
    unit.full_numel += p.numel();
    unit.parameters.push_back(std::move(p));
  }
  return unit;
}

}  // namespace ddx::train
