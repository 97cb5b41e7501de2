#pragma once
// How much of the node's CPU time other processes took while `ddx health` measured its figures.
// A rate measured on a busy node says how busy the node was, not how healthy: judged against a
// baseline, a build running beside a level-2 run made 19 of 20 runs "low" (storage write, matmul
// rates) on a healthy VM. So when others took more than kBusyShare of the CPUs, the figures are
// still reported but not judged, and the row says why. No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "health/health_check.h"

namespace ddx::health {

// Others' share of all CPU time above which figures are not judged: a quarter of the node.
inline constexpr double kBusyShare = 0.25;

// One reading, in clock ticks (USER_HZ, as both files count).
struct CpuTicks {
  uint64_t busy = 0;   // every CPU's user, nice, system, irq, softirq and steal time (/proc/stat)
  uint64_t total = 0;  // the same plus idle and iowait: all the CPU time there was
  uint64_t ours = 0;   // this process and its waited-for children (/proc/self/stat)
  int cpus = 0;        // cpuN lines in /proc/stat
};

// Parse the two files' text; std::nullopt when either lacks what is needed.
std::optional<CpuTicks> parse_cpu_ticks(const std::string& proc_stat, const std::string& proc_self_stat);
// Reads /proc/stat and /proc/self/stat; std::nullopt where they cannot be read (not Linux).
std::optional<CpuTicks> read_cpu_ticks();

// What others took between two readings.
struct OtherLoad {
  double share = 0;  // of all CPU time, 0..1
  double cpus = 0;   // the same in CPUs: share x cpus
  bool busy() const { return share > kBusyShare; }
};
OtherLoad other_load(const CpuTicks& before, const CpuTicks& after);

// The row "other load", and the figures of `measured` left unjudged when the node was busy. A
// missing reading is a skipped row and leaves the figures judged.
Check other_load_row(const std::optional<CpuTicks>& before, const std::optional<CpuTicks>& after,
                     std::vector<Check>& measured);

}  // namespace ddx::health
