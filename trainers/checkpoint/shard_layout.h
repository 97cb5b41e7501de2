#pragma once
// How a sharded unit's parameters are laid out over the ranks (no LibTorch: pure index
// arithmetic). FSDP's units use it, and so does the sharded checkpoint format that fsdp, tp, 2d
// and pp share (sharded_checkpoint.h) and `ddx checkpoint consolidate`: it lives with the format.
//
// Every parameter is split along dim 0 as torch.chunk(param, W, dim=0) splits it (FSDP2's
// Shard(0)): with c = ceil(rows / W), rank r owns rows [min(r*c, rows), min((r+1)*c, rows)),
// so late ranks may own fewer rows or none. Each rank stores c rows per parameter (the
// missing ones are zero padding), and a unit's shards are concatenated into one flat buffer:
//
//   rank r's flat shard:   [ p0: c0 rows | p1: c1 rows | ... ]      shard_numel elements
//   all-gathered buffer:   [ rank 0's flat shard | rank 1's | ... ]  W * shard_numel
//
// The unsharded parameters live contiguously in another buffer (full_offset, in parameter
// order), so the all-gather is one collective per unit and the copy-out one copy per
// parameter; the gradient reduce-scatter uses the same [W, shard_numel] layout.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ddx::train {

struct ShardedParameter {
  std::string name;
  std::vector<int64_t> shape;   // full shape
  int64_t rows = 0;             // shape[0]
  int64_t row_numel = 1;        // elements per row (product of shape[1:])
  int64_t rows_per_rank = 0;    // c = ceil(rows / W): rows of every rank's (padded) shard
  int64_t shard_offset = 0;     // in the unit's flat shard, elements
  int64_t full_offset = 0;      // in the unit's unsharded buffer, elements

  int64_t numel() const { return rows * row_numel; }
  int64_t shard_numel() const { return rows_per_rank * row_numel; }
  // Rows of dim 0 that `rank` owns: [row_begin, row_end), possibly empty.
  int64_t row_begin(int rank) const;
  int64_t row_end(int rank) const;
  int64_t owned_rows(int rank) const { return row_end(rank) - row_begin(rank); }
};

struct UnitLayout {
  std::string name;                      // "root", "embeddings", "block 3", "head"
  int world_size = 1;
  std::vector<ShardedParameter> parameters;
  int64_t shard_numel = 0;               // per rank, padding included
  int64_t full_numel = 0;                // unsharded, no padding
};

// Rows per rank for a dim 0 of `rows` over `world_size` ranks (torch.chunk's chunk size).
int64_t rows_per_rank(int64_t rows, int world_size);

// Lays out the parameters (name, full shape), in the given order. Throws std::invalid_argument
// for a scalar parameter (nothing to shard along) or world_size < 1.
UnitLayout make_unit_layout(std::string name, const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters,
                            int world_size);

}  // namespace ddx::train
