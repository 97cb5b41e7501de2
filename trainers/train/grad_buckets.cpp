#include "train/grad_buckets.h"

namespace ddx::train {

std::vector<Bucket> assign_buckets(const std::vector<torch::Tensor>& params, const std::vector<int>& order,
                                   int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<Bucket> buckets;
  int64_t bytes = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  for (int index : order) {
    const torch::Tensor& p = params[index];
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    // The open bucket is the first one while only one exists.
    const int64_t limit = buckets.size() == 1 ? first_cap_bytes : cap_bytes;
    const bool start_new = buckets.empty() ||
                           (bytes > 0 && (bytes + size > limit || p.scalar_type() != dtype));
    if (start_new) {
      buckets.emplace_back();
      bytes = 0;
      dtype = p.scalar_type();
    }
    Bucket& b = buckets.back();
    b.slots.push_back({index, b.numel, p.numel()});
    b.numel += p.numel();
    bytes += size;
  }
  for (Bucket& b : buckets) {
    const torch::Tensor& first = params[b.slots.front().param];
    b.flat = torch::zeros({b.numel}, first.options().requires_grad(false));
  }
  return buckets;
}

}  // namespace ddx::train
