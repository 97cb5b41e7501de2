#pragma once
// The stages of active_checks() (active_checks.h) that run kernels, one file each; the stages
// that run none are LibTorch-free in health/ (storage_check.h, local_collectives.h,
// throttle_watch.h).
#include <map>
#include <string>
#include <vector>

#include "health/health_check.h"
#include "health/torch/known_answer_gemm.h"
#include "node/rank_probe.h"

namespace ddx::health {

// The known answers of a run, by dtype, made on first use (every device of a run is a CPU or
// every one a GPU, so they share a size).
class KnownAnswers {
 public:
  const KnownAnswer& get(const std::string& dtype, int64_t size);

 private:
  std::map<std::pair<std::string, int64_t>, KnownAnswer> answers_;
};

// "gemm <device> <dtype>" per device and dtype it supports (gemm_checks.cpp): exact or CRITICAL
// naming the element, and the rate as a judged ddx_health_gemm_tflops{device, dtype}.
std::vector<Check> gemm_checks(const std::vector<GemmDevice>& devices, KnownAnswers& answers);

// "compute <device>", "memory <device>" and "host-device <gpu>" (node_figures.cpp): the kernels
// of `ddx probe compute` and `ddx probe memory`, each the median of a few short trials, as judged
// Metrics; one skipped "host-device" row on a node without GPUs.
std::vector<Check> figure_checks(const std::vector<GemmDevice>& devices);

// Level 3 (burn_in.cpp): every device repeats its known-answer GEMMs for `seconds`, all devices
// at once, every product checked; progress on stderr every ~10 s. "burn-in <device>" per device
// (CRITICAL naming the first wrong element, else the sustained rate as a judged
// ddx_health_burnin_tflops{device}), then what throttle_watch.h saw.
std::vector<Check> burn_in_checks(const std::vector<GemmDevice>& devices, KnownAnswers& answers, double seconds);

// Where `device`'s kernels run, for node::time_trial; and how many short trials a rate is the
// best of (the node probes' rule: on a shared node a trial can only be slowed by others).
node::Placement placement(const GemmDevice& device);
constexpr int kTrials = 3;

// The row of a stage that threw: on a GPU a failed kernel is the GPU's fault (CRITICAL), on the
// CPU ddx's own (UNKNOWN).
Check failed_row(const std::string& name, const GemmDevice& device, const std::string& what);

}  // namespace ddx::health
