#pragma once
// Level 1's rows about the node itself: the doctor's facts of this one node judged by the doctor
// (/dev/shm against the local ranks, ulimits, versions, CPU kernels, GPUs against local ranks,
// disk, CPU governor; the rows about the rendezvous and other hosts left out), the memory left,
// and whether the kernel's clock is synchronised (one node has no peer to measure skew against).
// No LibTorch.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ddx/processes/env.h"
#include "doctor/doctor_checks.h"
#include "health/health_check.h"

namespace ddx::health {

// The doctor's rows this node keeps, renamed ("/dev/shm vs local ranks" -> "shm"), in the
// doctor's order; every other row (clock skew between hosts, interfaces, MASTER_ADDR, Gloo's
// interface, hosts reaching each other, OMP_NUM_THREADS of this process) is left out.
std::vector<Check> doctor_node_rows(const std::vector<doctor::CheckRow>& rows);
// The doctor's row names doctor_node_rows leaves out on purpose (a new doctor row is in neither
// list until someone decides).
const std::vector<std::string>& doctor_rows_left_out();

struct NodeFacts {
  std::string host;
  int local_ranks = 1;
  int gpus = 0;  // NVML's count: the doctor's /dev/shm row FAILs only with GPUs
  std::vector<std::pair<std::string, std::string>> versions;
  std::string shm_path = "/dev/shm", sysfs_root = "/sys", cpuinfo_path = "/proc/cpuinfo";
  std::string disk_path = "/tmp";  // the doctor's free-disk row: where jobs write scratch
};
// The doctor's facts of this node (a one-rank, one-node rendezvous of `local_ranks` local ranks)
// judged by the doctor; one UNKNOWN row when the facts could not be collected.
std::vector<Check> doctor_checks_of_node(const NodeFacts& node, const EnvMap& env);

// MemAvailable against MemTotal (/proc/meminfo): WARN below kMemoryWarnFraction. Never CRITICAL:
// a running job may use the memory; leftover processes of a finished one show here too.
inline constexpr double kMemoryWarnFraction = 0.05;
struct MemoryFacts {
  std::string error;  // "" when read
  uint64_t total_bytes = 0, available_bytes = 0;
};
MemoryFacts read_memory(const std::string& meminfo_path);
Check judge_memory(const MemoryFacts& memory);

// The kernel's NTP state (adjtimex, read only): STA_UNSYNC set means nothing disciplines the
// clock; a synchronised clock whose maximum error exceeds kClockMaxErrorWarnMs (the doctor's
// clock-skew WARN) is WARN too.
inline constexpr double kClockMaxErrorWarnMs = 100;
struct ClockFacts {
  std::string error;  // adjtimex refused: ""
  bool synchronised = false;
  long max_error_us = 0, estimated_error_us = 0;
};
ClockFacts read_clock();
Check judge_clock(const ClockFacts& clock);

}  // namespace ddx::health
