// The parity self-test's planted bugs (docs/parity.md): each breaks a strategy the way a real
// bug would, in the strategy's own code (which asks faults::find_any for it), so the suite can
// prove it reports each one. rank in scale-grad is the data-parallel group rank.
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class PlantedBug : public Kind {
 public:
  PlantedBug(std::string name, std::string summary, std::vector<std::string> keys = {})
      : name_(std::move(name)), summary_(std::move(summary)), keys_(std::move(keys)) {}
  std::string name() const override { return name_; }
  std::string category() const override { return "planted bug"; }
  std::string summary() const override { return summary_; }
  std::vector<std::string> keys() const override { return keys_; }
  void check(const FaultSpec& s) const override {
    if (name_ == "scale-grad") {
      if (s.rank < 0 || s.params.count("factor") == 0) s.fail("scale-grad needs rank=R and factor=F");
      s.number_param("factor", 1, -1e30, 1e30);
    }
    if (name_ == "scale-grad-element" || name_ == "lr-scale") {
      if (s.params.count("factor") == 0) s.fail(name_ + " needs factor=F");
      s.number_param("factor", 1, -1e30, 1e30);
    }
    if (name_ == "skip-bucket") {
      if (s.params.count("bucket") == 0) s.fail("skip-bucket needs bucket=K");
      s.int_param("bucket", 0, 0, 1 << 20);
    }
  }

 private:
  std::string name_, summary_;
  std::vector<std::string> keys_;
};

}  // namespace

const Kind& local_mean_kind() {
  static const PlantedBug kind("local-mean", "normalise each rank's loss by its own token count (mean of means)");
  return kind;
}
const Kind& scale_grad_kind() {
  static const PlantedBug kind("scale-grad", "multiply rank R's gradients by factor=F before they are reduced",
                               {"factor"});
  return kind;
}
const Kind& scale_grad_element_kind() {
  static const PlantedBug kind("scale-grad-element",
                               "multiply the largest element of DDP's reduced gradient of the first parameter by factor=F",
                               {"factor"});
  return kind;
}
const Kind& lr_scale_kind() {
  static const PlantedBug kind("lr-scale", "DDP's optimizer steps at the learning rate times factor=F", {"factor"});
  return kind;
}
const Kind& skip_bucket_kind() {
  static const PlantedBug kind("skip-bucket", "never all-reduce DDP gradient bucket=K", {"bucket"});
  return kind;
}
const Kind& fsdp_double_divide_kind() {
  static const PlantedBug kind("fsdp-double-divide", "divide FSDP's reduce-scattered gradients by the world twice");
  return kind;
}
const Kind& tp_no_input_reduce_kind() {
  static const PlantedBug kind("tp-no-input-reduce", "leave out TP's all-reduce of column-parallel input gradients");
  return kind;
}

const Kind& sp_no_replicated_reduce_kind() {
  static const PlantedBug kind("sp-no-replicated-reduce",
                               "under sequence parallelism, leave out the TP-group sum of the replicated parameters' "
                               "gradients (norms, biases), each rank keeping its sequence slice's part");
  return kind;
}

const Kind& pp_double_microbatch_kind() {
  static const PlantedBug kind("pp-double-microbatch",
                               "the pipeline's last stage runs micro-batch 0's backward twice (its gradient counted twice)");
  return kind;
}

}  // namespace ddx::faults
