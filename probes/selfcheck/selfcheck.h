#pragma once
// `ddx probe selfcheck`: every rank runs every op of the collective layer on several sizes and
// dtypes with data whose correct result is known exactly, and rank 0 reports PASS/FAIL per op
// with the first wrong rank and offset. "Is every GPU in the job reachable and correct?"
#include <cstdint>
#include <string>
#include <vector>

#include "ddx/process_group.h"

namespace ddx::probes {

struct SelfcheckOptions {
  std::vector<int64_t> sizes{1, 7, 1000, 65537};  // elements; odd sizes catch chunking bugs
  std::vector<std::string> dtypes{"float32", "float64", "bfloat16", "int32", "int64"};
  std::string device = "auto";  // auto | cpu | cuda
  std::string json_path;        // full per-rank results, written by rank 0
};

// One op x dtype x size (x root) on one rank.
struct CheckResult {
  std::string op;        // "all_reduce.sum", "broadcast", ...
  std::string dtype;
  int64_t size = 0;      // elements per rank
  int root = -1;         // rooted ops
  int64_t wrong = 0;     // elements that differ from the exact result
  int64_t first_offset = -1;
  double got = 0, expected = 0;  // at first_offset
  std::string error;     // the op threw
  double seconds = 0;
};

// Runs every check on this rank. Stops at the first op that throws (the group is then
// unusable) and records the error.
std::vector<CheckResult> run_checks(Group& group, const SelfcheckOptions& options);

// Gathers every rank's results through the store (independent of the collectives under test),
// prints the table on rank 0 and writes the JSON. Returns the exit code, the same on every rank
// (rank 0's verdict, written into every rank's error file when it failed: ddx/errors/verdict.h): 0 when
// all pass.
int report_selfcheck(World& world, const std::vector<CheckResult>& mine,
                     const SelfcheckOptions& options, double seconds);

}  // namespace ddx::probes
