#pragma once
// How a model is split over a tensor-parallel group: the group, whether sequence parallelism
// is on, and where each rank's slice of a parameter sits in the full tensor. No LibTorch here;
// the layers that use it are in parallel_layers.h.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddx {
class Group;
}

namespace ddx::models {

// The TP group a model's parallel layers communicate over.
struct TensorParallel {
  Group* group = nullptr;          // nullptr: not split
  bool sequence_parallel = false;  // activations outside the TP regions split along the sequence
  // Parity self-test only (DDX_FAULT=tp-no-input-reduce): copy_to_tp's backward skips its
  // all-reduce, the classic TP bug the suite must catch.
  bool test_skip_input_reduce = false;
  int size() const;
  int rank() const;
};

// [begin, end) along one dimension of a full tensor.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Part `part` of `total` rows split over `parts`: ceil(total / parts) rows each, the last part
// shorter when `parts` does not divide `total` (vocab 1001 over 4 ranks: 251, 251, 251, 248).
// The model is never changed; the last shard is simply short. Throws UsageError when a part
// would be empty (more parts than the split allows).
Range shard_range(int64_t total, int parts, int part, const std::string& what);

// Where a rank's tensor-parallel parameter sits in the full one: along `dim` the local tensor
// is the concatenation of the global `ranges` (GPT-2's fused c_attn holds one per q, k and v).
// A parameter without one is replicated over the TP group.
struct ParameterShard {
  std::vector<int64_t> full_shape;
  int64_t dim = 0;
  std::vector<Range> ranges;
};
using ParameterShards = std::map<std::string, ParameterShard>;

}  // namespace ddx::models
