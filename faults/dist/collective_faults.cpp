// The collective layer's side of the injection point: a hook (ddx/collectives.h) that asks the
// faults of this rank about each collective and carries out what they ask on its tensors.
#include <mutex>
#include <set>

#include "ddx/collectives.h"
#include "ddx/op_record.h"
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class CollectiveFaults : public CollectiveHook {
 public:
  void before_launch(OpRecord& record, std::vector<at::Tensor>&) override {
    if (!before_collective(to_string(record.op)).corrupt_result) return;
    std::lock_guard<std::mutex> lock(mutex_);
    to_corrupt_.insert(record.id);
  }
  void after_wait(const OpRecord& record, std::vector<at::Tensor>& outputs) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (to_corrupt_.erase(record.id) == 0) return;
    }
    if (!outputs.empty() && outputs[0].numel() > 0) outputs[0].view({-1})[0].add_(1);
  }

 private:
  // Records launched with a corruption pending: several collectives can be in flight (DDP's
  // buckets), and a fault limited to one step must hit only that step's results.
  std::mutex mutex_;
  std::set<uint64_t> to_corrupt_;
};

}  // namespace

void install_collective_faults(int global_rank, int world_size) {
  set_rank(global_rank, world_size);
  if (!touches_collectives()) return;
  // Lives for the whole process, like the collective layer's hook list.
  static auto* hook = new CollectiveFaults();
  add_collective_hook(hook);
}

}  // namespace ddx::faults
