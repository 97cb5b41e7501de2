#include "ddx/outliers.h"

#include <algorithm>
#include <cmath>

namespace ddx {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double median_absolute_deviation(const std::vector<double>& values) {
  const double m = median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double v : values) deviations.push_back(std::fabs(v - m));
  return median(deviations);
}

double low_threshold(double reference, double mad, const OutlierRule& rule) {
  // 1.4826 x MAD is the standard deviation of a normal distribution with that MAD.
  constexpr double kMadToSigma = 1.4826;
  return reference - std::max(rule.margin * reference, rule.mad_factor * kMadToSigma * mad);
}

std::vector<Outlier> low_outliers(const std::vector<double>& values, const OutlierRule& rule) {
  std::vector<Outlier> found;
  if (values.size() < 2) return found;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<double> peers;
    peers.reserve(values.size() - 1);
    for (size_t j = 0; j < values.size(); ++j) {
      if (j != i) peers.push_back(values[j]);
    }
    const double m = median(peers);
    const double threshold = low_threshold(m, median_absolute_deviation(peers), rule);
    if (m > 0 && values[i] < threshold) found.push_back({i, values[i], m, threshold});
  }
  return found;
}

}  // namespace ddx
