#include "bandwidth/pairwise.h"

#include <algorithm>

#include "bandwidth/stats.h"

namespace ddx::bw {

std::vector<std::vector<std::pair<int, int>>> pair_rounds(int nranks) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (nranks < 2) return rounds;
  // An odd count gets a phantom rank; whoever is paired with it sits the round out.
  const int m = nranks % 2 ? nranks + 1 : nranks;
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> round;
    auto add = [&](int a, int b) {
      if (a >= nranks || b >= nranks) return;
      round.emplace_back(std::min(a, b), std::max(a, b));
    };
    // Rank m-1 stays fixed; the others rotate around it.
    add(m - 1, r);
    for (int i = 1; i < m / 2; ++i) add((r + i) % (m - 1), (r - i + (m - 1)) % (m - 1));
    std::sort(round.begin(), round.end());
    rounds.push_back(round);
  }
  return rounds;
}

int partner_in_round(const std::vector<std::pair<int, int>>& round, int rank) {
  for (const auto& [a, b] : round) {
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

void analyze_pairs(PairReport& report, double fraction, double min_gbs) {
  const int n = report.nranks;
  report.matrix.assign(n, std::vector<double>(n, 0.0));
  std::vector<std::vector<double>> per_rank(n);
  report.wrong = 0;
  for (const auto& p : report.pairs) {
    report.matrix[p.a][p.b] = report.matrix[p.b][p.a] = p.gbs;
    per_rank[p.a].push_back(p.gbs);
    per_rank[p.b].push_back(p.gbs);
    report.wrong += p.wrong;
  }
  // Slow ranks first, each rank's median link against the same figure of its peers (the shared
  // outlier rule, ddx/outliers.h): with few ranks a slow rank owns many of the links (2 of 3
  // with three ranks), which would drag a plain median of links down with it.
  std::vector<int> ranks_with_links;
  std::vector<double> rank_medians;
  for (int r = 0; r < n; ++r) {
    if (per_rank[r].empty()) continue;
    ranks_with_links.push_back(r);
    rank_medians.push_back(median(per_rank[r]));
  }
  report.slow_ranks.clear();
  std::vector<bool> slow(n, false);
  if (n >= 3) {  // with two ranks there is one link and no way to tell which end is slow
    OutlierRule rule;
    rule.margin = 1.0 - fraction;
    std::vector<bool> below(rank_medians.size(), false);
    for (const Outlier& o : low_outliers(rank_medians, rule)) below[o.index] = true;
    for (size_t i = 0; i < rank_medians.size(); ++i) {
      if (below[i] || (min_gbs > 0 && rank_medians[i] < min_gbs)) {
        report.slow_ranks.emplace_back(ranks_with_links[i], rank_medians[i]);
        slow[ranks_with_links[i]] = true;
      }
    }
  }
  // The reference link: the median of the links between ranks that are not slow.
  std::vector<double> healthy, all;
  for (const auto& p : report.pairs) {
    all.push_back(p.gbs);
    if (!slow[p.a] && !slow[p.b]) healthy.push_back(p.gbs);
  }
  report.median_gbs = median(healthy.empty() ? all : healthy);
  const double floor_gbs = fraction * report.median_gbs;
  report.slow_links.clear();
  for (const auto& p : report.pairs) {
    if (p.gbs < floor_gbs || (min_gbs > 0 && p.gbs < min_gbs)) report.slow_links.push_back(p);
  }
  std::sort(report.slow_links.begin(), report.slow_links.end(),
            [](const PairMeasurement& x, const PairMeasurement& y) { return x.gbs < y.gbs; });
}

}  // namespace ddx::bw
