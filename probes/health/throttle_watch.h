#pragma once
// What the level-3 burn-in of `ddx health` watches besides its products: whether the devices
// slowed down or logged errors under load. GPU: NVML's clock event (throttle) reasons, sampled
// while the burn-in runs and judged as `ddx probe gpu-health` judges them (probes/gpu), and the
// volatile ECC counts before and after. CPU: the kernel's thermal throttle event counters
// (/sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count) before and after. No LibTorch.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "health/health_check.h"

namespace ddx {
class Nvml;
}  // namespace ddx

namespace ddx::gpu {
struct GpuFacts;
}  // namespace ddx::gpu

namespace ddx::health {

// Counter file (relative to the sysfs root) -> events since boot. Empty where the kernel has no
// such counters (virtual machines, other architectures).
using CpuThrottleCounts = std::map<std::string, uint64_t>;
CpuThrottleCounts read_cpu_throttle_counts(const std::string& sysfs_root = "/sys");
// "burn-in cpu throttle": WARN naming the CPUs whose counters rose, OK when none did, skipped
// when there are no counters.
Check judge_cpu_throttle(const CpuThrottleCounts& before, const CpuThrottleCounts& after);

// The GPUs under load, watched through NVML from start to finish.
class GpuWatch {
 public:
  // label ("gpu0") and PCI bus id as CUDA gives it ("0000:3b:00.0"), per GPU.
  explicit GpuWatch(const std::vector<std::pair<std::string, std::string>>& gpus);
  ~GpuWatch();
  // The clock event reasons now, added to those seen so far.
  void sample();
  // Per GPU "burn-in gpu0 clocks" (every reason seen while loaded, judged as gpu-health's clocks
  // row) and "burn-in gpu0 ecc" (uncorrected errors during the burn-in CRITICAL, corrected WARN).
  // One skipped row when NVML could not be loaded.
  std::vector<Check> finish();

 private:
  struct Watched;
  std::unique_ptr<Nvml> nvml_;
  std::string why_no_nvml_;
  std::vector<Watched> gpus_;
};

// Throttle reasons and ECC counts judged from facts read before and after (and the reasons ORed
// over the samples): the rows of GpuWatch::finish, unit-tested on planted facts.
std::vector<Check> judge_gpu_under_load(const std::string& label, const gpu::GpuFacts& before,
                                        const gpu::GpuFacts& after, unsigned long long reasons_seen);

}  // namespace ddx::health
