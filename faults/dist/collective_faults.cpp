// The collective layer's side of the injection point: a hook (ddx/collectives.h) that asks the
// faults of this rank about each collective and carries out what they ask on its tensors.
#include <ATen/ATen.h>

#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "ddx/collective_filter.h"
#include "ddx/collectives.h"
#include "ddx/watchdog/op_record.h"
#include "faults/faults.h"

namespace ddx::faults {
namespace {

// The kinds are asked once per op, in leave_out (the layer's first question, ddx/collective_filter.h);
// before_launch, which follows on the same thread for an op not left out, carries out the rest.
thread_local CollectiveCall t_call;

bool leave_out(const OpRecord& record) {
  t_call = before_collective(to_string(record.op));
  return t_call.skip;
}

class CollectiveFaults : public CollectiveHook {
 public:
  void before_launch(OpRecord& record, std::vector<at::Tensor>& inputs) override {
    const CollectiveCall call = std::exchange(t_call, CollectiveCall{});
    std::lock_guard<std::mutex> lock(mutex_);
    if (call.corrupt_result) to_corrupt_.insert(record.id);
    if (call.drop_last_element && !inputs.empty() && inputs[0].numel() > 0) {
      // The launcher captured the same tensor (one TensorImpl): shrinking it here shrinks what
      // this rank hands to the backend. after_wait gives the caller its shape back.
      at::Tensor& t = inputs[0];
      shrunk_[record.id] = t.sizes().vec();
      t.resize_({t.numel() - 1});
      record.in_shape = record.out_shape = t.sizes().vec();
      record.numel = t.numel();
      record.bytes = t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  void after_wait(const OpRecord& record, std::vector<at::Tensor>& outputs) override {
    bool corrupt = false;
    std::vector<int64_t> shape;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      corrupt = to_corrupt_.erase(record.id) > 0;
      if (auto it = shrunk_.find(record.id); it != shrunk_.end()) {
        shape = it->second;
        shrunk_.erase(it);
      }
    }
    if (!shape.empty() && !outputs.empty()) outputs[0].resize_(shape);
    if (corrupt && !outputs.empty() && outputs[0].numel() > 0) outputs[0].view({-1})[0].add_(1);
  }

 private:
  // Records launched with a corruption pending: several collectives can be in flight (DDP's
  // buckets), and a fault limited to one step must hit only that step's results.
  std::mutex mutex_;
  std::set<uint64_t> to_corrupt_;
  std::map<uint64_t, std::vector<int64_t>> shrunk_;  // record id -> the caller's shape
};

}  // namespace

void install_collective_faults(int global_rank, int world_size) {
  set_rank(global_rank, world_size);
  if (!touches_collectives()) return;
  // Lives for the whole process, like the collective layer's hook list.
  static auto* hook = new CollectiveFaults();
  add_collective_hook(hook);
  set_leave_out_filter(&leave_out);
}

}  // namespace ddx::faults
