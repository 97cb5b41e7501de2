#pragma once
// DDP's gradient buckets: parameters grouped into flat buffers of at most `cap` bytes (the
// first one smaller, so the last layers' gradients — the first to arrive — start communicating
// early), launched strictly in bucket order so every rank issues the same collectives. The
// strategies that sum gradients after backward (pp --dp-replicate over dp, --sequence-parallel
// over tp) go through the same buckets.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace ddx {
class Group;  // ddx/process_group.h
}

namespace ddx::train {

// --bucket-cap-mb and --first-bucket-mb as bytes.
int64_t megabytes_to_bytes(double mb);

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

// Sums `grads` (the same shapes on every rank of `group`; undefined or empty ones are skipped)
// over `group` in place, one all-reduce per bucket of at most `cap_bytes` (assign_buckets()'s
// grouping, in list order). A bucket is packed while the one before it is in flight, and freed
// once written back, so at most two buckets' worth of copies exist, never a model-sized one.
// Returns the seconds spent waiting for the all-reduces.
double sum_gradients_in_buckets(Group& group, const std::vector<torch::Tensor>& grads, int64_t cap_bytes);

}  // namespace ddx::train
