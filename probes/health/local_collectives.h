#pragma once
// The collectives inside one node for `ddx health`: an all-reduce across its local devices
// (level 2) and the pairwise links between its GPUs (level 3). Each is one run of
// `ddx probe bandwidth` under `ddx launch` on this node, as a child process with a hard timeout
// (ddx/processes/run_process.h): the probe, engines and data checks an operator runs by hand, not a copy
// of them. Its JSON is judged here. No LibTorch.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "ddx/processes/run_process.h"
#include "health/health_check.h"

namespace ddx::health {

struct LocalRun {
  std::string ddx;         // the ddx executable (self_executable())
  int ranks = 2;           // ddx launch -np
  std::string engine;      // gloo (CPU ranks) or nccl (one GPU per rank, raw NCCL)
  double timeout_s = 60;   // the whole child, ddx launch included
};

// What a finished run left: how it ended, its JSON (when it wrote one) and the line of its log
// that says most (the first "error" line, else the last line).
struct LocalRunResult {
  ProcessOutcome outcome;
  std::optional<nlohmann::json> json;
  std::string log_line;
};

// `ddx launch -np R -- ddx probe bandwidth --engine E --op-list all_reduce ...` with the data
// checked after the timed iterations, judged by judge_all_reduce. One row, "all-reduce".
Check all_reduce_check(const LocalRun& run);
// `... --pairs`: every pair of GPUs at once, judged by judge_pairwise. One row, "links".
Check pairwise_check(const LocalRun& run);

// The row of a finished run. Wrong data is CRITICAL (the first wrong element named); a hang or
// a failed op of NCCL is CRITICAL (the node's GPUs cannot all-reduce), of Gloo on loopback
// UNKNOWN (nothing of the node's hardware but its CPUs and memory is involved, and the GEMM
// checks cover those); no result at all is UNKNOWN. OK rows carry the bus bandwidth as a judged
// Metric, ddx_health_allreduce_busbw_gbps{engine, ranks}.
Check judge_all_reduce(const LocalRun& run, const LocalRunResult& result);
// Links (a judged ddx_health_link_gbps{a="gpu0", b="gpu1"} each): wrong data CRITICAL, the
// probe's slow links (below half the median link) WARN.
Check judge_pairwise(const LocalRun& run, const LocalRunResult& result);

}  // namespace ddx::health
