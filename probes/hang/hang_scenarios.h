#pragma once
// `ddx probe hang`: small jobs that hang on purpose in one of the ways real jobs do, so the
// watchdog, the flight recorder and `ddx analyze` can be checked end to end on a cluster (and
// the cluster's own failure behaviour with them).
#include <chrono>
#include <string>
#include <vector>

#include "analyzer/diagnosis.h"
#include "ddx/hang_detection.h"
#include "ddx/process_group.h"

namespace ddx::probes {

enum class HangScenario {
  Healthy,            // control: every rank does the same; must report no problem
  MissingCollective,  // the culprit skips one all-reduce
  MismatchedOp,       // the culprit all-gathers while the others all-reduce
  MismatchedSize,     // the culprit all-reduces fewer elements
  Straggler,          // the culprit sleeps longer than the collective timeout
  DeadRank,           // the culprit is SIGKILLed right after launching an all-reduce
  P2PDeadlock,        // the culprit reverses its send/recv order with its partner
};

const std::vector<std::string>& hang_scenario_names();
HangScenario parse_hang_scenario(const std::string& name);  // UsageError naming it otherwise
const char* to_string(HangScenario scenario);

struct HangJob {
  HangScenario scenario = HangScenario::MissingCollective;
  int culprit = 1;
  int steps = 4;             // each step: (p2p exchange,) one all-reduce of `numel` floats
  int bad_step = 3;          // the culprit misbehaves here (earlier steps are its history)
  int64_t numel = 1024;
  std::string device = "cpu";  // cuda with --backend nccl
  std::chrono::milliseconds timeout{5000};
  std::string trace_dir;     // the culprit notes when it misbehaves in <trace_dir>/ddx-probe-fault.json
};

// When the culprit planted the fault (wall clock ms), from <trace_dir>/ddx-probe-fault.json; 0
// when it did not (healthy) or the file is missing.
int64_t planted_fault_unix_ms(const std::string& trace_dir);

// What the diagnosis must say for the planted fault: finding kinds that count, the culprit and
// the op named. Healthy expects no finding.
struct ExpectedVerdict {
  std::vector<analyze::FindingKind> kinds;
  int culprit = -1;
  std::vector<std::string> ops;
};
ExpectedVerdict expected_verdict(const HangJob& job);

// Checks the verdict; returns "" when it matches, else what differs.
std::string check_verdict(const HangJob& job, const analyze::Diagnosis& dx);

// The worker side: runs the job on this rank (returns only if this rank gets to the end).
void run_hang_job(World& world, HangDetection& hangs, const HangJob& job);

}  // namespace ddx::probes
