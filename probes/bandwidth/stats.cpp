#include "bandwidth/stats.h"

#include <algorithm>
#include <cmath>

namespace ddx::bw {

int percentile_index(int n, int percentile) {
  return std::max(0, std::min(n - 1, (n * percentile + 99) / 100 - 1));
}

IterStats iter_stats(std::vector<double> samples) {
  IterStats s;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const int n = s.samples;
  s.min = samples.front();
  s.max = samples.back();
  s.p50 = samples[n / 2];
  s.p95 = samples[percentile_index(n, 95)];
  s.p99 = samples[percentile_index(n, 99)];
  double sum = 0;
  for (double v : samples) sum += v;
  s.avg = sum / n;
  double var = 0;
  for (double v : samples) var += (v - s.avg) * (v - s.avg);
  s.stdev = std::sqrt(var / n);
  return s;
}

std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& per_rank) {
  std::vector<double> out;
  for (const auto& samples : per_rank) {
    if (samples.size() > out.size()) out.resize(samples.size(), 0.0);
    for (size_t i = 0; i < samples.size(); ++i) out[i] = std::max(out[i], samples[i]);
  }
  return out;
}

}  // namespace ddx::bw
