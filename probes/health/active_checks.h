#pragma once
// Levels 2 and 3 of `ddx health`: active checks that run kernels (the only LibTorch part; the
// implementation lives in health/torch/). Level 2 (60 s or less): a known-answer GEMM for silent
// data corruption in each dtype every device supports, compute and memory figures, host-to-device
// and device-to-host bandwidth, an all-reduce across the node's local devices, a storage
// write-and-fsync test on each --path. Level 3 adds the pairwise links inside the node and a
// burn-in under load that watches throttling and errors; it has no time limit.
#include <string>
#include <vector>

#include "health/health_check.h"

namespace ddx::health {

struct ActiveOptions {
  int level = 2;                    // 2 or 3
  std::string device = "auto";      // auto (every GPU, else the CPU), cpu, cuda
  std::vector<std::string> paths;   // storage test: one file written, fsynced and removed in each
  double storage_mib = 256;
  double burn_in_s = 300;           // level 3
  int nvml_gpus = 0;                // GPUs level 1 found through NVML: `auto` must test them, not the CPU
};

// Every level-2 (and level-3) row. Figures go into Check::metrics (judged = true for rates);
// whether a figure is low is judged against a baseline by the caller (baseline.h).
std::vector<Check> active_checks(const ActiveOptions& options);

}  // namespace ddx::health
