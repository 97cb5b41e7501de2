#pragma once
// Summaries of timing samples, with nccl-tests' conventions: p50 is sorted[n/2], other
// percentiles are nearest-rank (so with fewer than 100 samples p99 may equal the max).
#include <vector>

#include "ddx/outliers.h"

namespace ddx::bw {

struct IterStats {
  int samples = 0;
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0;
  double cv_pct() const { return avg > 0 ? stdev / avg * 100.0 : 0.0; }
};

IterStats iter_stats(std::vector<double> samples);

// Index of the nearest-rank `percentile` in a sorted list of n samples.
int percentile_index(int n, int percentile);

using ddx::median;  // one median for the whole tree (ddx/outliers.h)

// Per-iteration job time: sample i is the slowest rank's time of iteration i (what the job
// waits for). `per_rank[r][i]`; ranks with fewer samples are ignored past their end.
std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& per_rank);

}  // namespace ddx::bw
