#pragma once
// DDP's gradient buckets: parameters grouped into flat buffers of at most `cap` bytes (the
// first one smaller, so the last layers' gradients — the first to arrive — start communicating
// early), launched strictly in bucket order so every rank issues the same collectives.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace ddx::train {

struct BucketSlot {
  int param = 0;        // index into the strategy's parameter list
  int64_t offset = 0;   // elements into the bucket
  int64_t numel = 0;
};

struct Bucket {
  std::vector<BucketSlot> slots;
  torch::Tensor flat;   // the bucket's buffer (parameter dtype and device)
  int64_t numel = 0;
};

// Assigns parameters, taken in `order`, to buckets: the first bucket holds up to
// `first_cap_bytes`, the others up to `cap_bytes`; a parameter larger than the cap gets a
// bucket of its own. Parameters of different dtypes never share a bucket.
std::vector<Bucket> assign_buckets(const std::vector<torch::Tensor>& params, const std::vector<int>& order,
                                   int64_t first_cap_bytes, int64_t cap_bytes);

}  // namespace ddx::train
