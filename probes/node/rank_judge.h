#pragma once
// The verdict of a per-rank probe (`ddx probe compute`, `ddx probe memory`): every rank measured
// the same metrics over the same trials; each rank's figure is its best trial (STREAM's
// convention: another process on the host can only slow a trial down, so the best of several is
// the rank's own speed, while a throttled or sick rank is slow in every trial), and a rank (or, across hosts, a whole host) well below its peers is named with the
// figures that condemn it (ddx/outliers.h). No LibTorch: unit-tested on planted samples.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "ddx/outliers.h"

namespace ddx::node {

struct Metric {
  std::string key;    // "fp32_n512", stable in JSON
  std::string label;  // "fp32 n=512"
  std::string unit;   // "TFLOP/s", "GB/s"
};

struct RankSamples {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  std::string device;  // "NVIDIA H100 80GB HBM3", or the CPU's model name
  std::map<std::string, std::vector<double>> trials;  // metric key -> one value per trial
};

struct RankFlag {
  std::string metric;  // key
  int rank = 0, local_rank = 0;
  std::string host;
  double value = 0, peer_median = 0, threshold = 0;
};

struct HostFlag {
  std::string metric;
  std::string host;
  std::vector<int> ranks;
  double value = 0, peer_median = 0, threshold = 0;  // the host's best rank against other hosts' best
};

struct Verdict {
  std::vector<RankFlag> ranks;
  std::vector<HostFlag> hosts;
  std::string inconclusive;  // why nothing could be judged (too few trials, one rank), or ""
  bool passed() const { return ranks.empty() && hosts.empty(); }
};

// At least this many trials per metric before anyone is named: one or two samples on a busy
// machine are not evidence.
constexpr int kMinTrials = 3;

// A rank's figure for a metric: its best trial (0 without any).
double rank_figure(const RankSamples& r, const std::string& metric);

Verdict judge(const std::vector<Metric>& metrics, const std::vector<RankSamples>& ranks, const OutlierRule& rule);

// The report rank 0 prints: a header, one row per rank and metric (best, median, min, the
// ratio to the median of the others), per-host rows when there are several hosts, then one
// line per flagged rank or host, and the summary line "<probe>: ..." that validate shows.
std::string format_report(const std::string& probe, const std::vector<Metric>& metrics,
                          const std::vector<RankSamples>& ranks, const Verdict& verdict, const OutlierRule& rule);

nlohmann::json to_json(const std::string& probe, const std::vector<Metric>& metrics,
                       const std::vector<RankSamples>& ranks, const Verdict& verdict, const OutlierRule& rule);

}  // namespace ddx::node
