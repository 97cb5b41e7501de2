#include "strategies/ddp/grad_buckets.h"

#include <chrono>
#include <numeric>
#include <optional>

#include "ddx/collectives.h"

namespace ddx::train {
namespace {

// assign_buckets()'s grouping, without the buffers.
std::vector<Bucket> plan_buckets(const std::vector<torch::Tensor>& params, const std::vector<int>& order,
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
  return buckets;
}

}  // namespace

int64_t megabytes_to_bytes(double mb) { return static_cast<int64_t>(mb * 1024 * 1024); }

std::vector<Bucket> assign_buckets(const std::vector<torch::Tensor>& params, const std::vector<int>& order,
                                   int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<Bucket> buckets = plan_buckets(params, order, first_cap_bytes, cap_bytes);
  for (Bucket& b : buckets) {
    const torch::Tensor& first = params[b.slots.front().param];
    b.flat = torch::zeros({b.numel}, first.options().requires_grad(false));
  }
  return buckets;
}

double sum_gradients_in_buckets(Group& group, const std::vector<torch::Tensor>& grads, int64_t cap_bytes) {
  std::vector<torch::Tensor> present;
  for (const auto& g : grads) {
    if (g.defined() && g.numel() > 0) present.push_back(g);
  }
  if (group.size() == 1 || present.empty()) return 0.0;
  std::vector<int> order(present.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<Bucket> buckets = plan_buckets(present, order, cap_bytes, cap_bytes);
  double waited = 0;
  auto write_back = [&](Bucket& b, Work& work) {
    const auto t0 = std::chrono::steady_clock::now();
    work.wait();
    waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const BucketSlot& slot : b.slots) {
      torch::Tensor target = present[slot.param];  // the gradient's storage: copy_ writes it in place
      target.copy_(b.flat.narrow(0, slot.offset, slot.numel).view_as(target));
    }
    b.flat = torch::Tensor();
  };
  std::optional<Work> in_flight;  // the previous bucket's all-reduce
  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<torch::Tensor> parts;
    for (const BucketSlot& slot : buckets[k].slots) parts.push_back(present[slot.param].reshape({-1}));
    buckets[k].flat = torch::cat(parts);
    Work work = all_reduce(group, buckets[k].flat);
    if (in_flight) write_back(buckets[k - 1], *in_flight);
    in_flight = std::move(work);
  }
  write_back(buckets.back(), *in_flight);
  return waited;
}

}  // namespace ddx::train
