#pragma once
// Level 1 of `ddx health`: passive, 10 s or less, nothing loaded on the devices. The doctor's
// facts of this one node (/dev/shm against its local ranks, ulimits, disk, memory, clock,
// versions, CPU kernels), every GPU's NVML health (ECC, row remapping, retired pages, throttle
// reasons, PCIe width, generation and replays), the kernel log since boot (XIDs, machine checks;
// a documented whitelist of harmless XIDs) and the free space and inodes of the paths given.
// No LibTorch.
#include <string>
#include <vector>

#include "ddx/processes/env.h"
#include "health/health_check.h"

namespace ddx::health {

struct Level1Options {
  std::vector<std::string> paths;   // --path: checkpoint and scratch folders; a full one is CRITICAL
  int local_ranks = 0;              // ranks a job puts on this node; 0: the GPUs NVML sees, or 1
  std::string shm_path = "/dev/shm";
  std::string sysfs_root = "/sys";
  std::string cpuinfo_path = "/proc/cpuinfo";
  std::string meminfo_path = "/proc/meminfo";
};

// Every level-1 row, in a fixed order. Never throws for what it finds; a check that could not
// look at what it should have is UNKNOWN with why.
std::vector<Check> level1_checks(const Level1Options& options, const EnvMap& env);

// What the fleet groups this node by: the first GPU's NVML name, else /proc/cpuinfo's model name.
std::string node_device_model(const Level1Options& options);

}  // namespace ddx::health
