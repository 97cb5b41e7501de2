#pragma once
// Naming the one slow rank or host among healthy peers with robust statistics: each entry is
// compared with the median of the OTHERS (so a slow rank cannot drag its own reference down)
// and flagged only when it falls below that median by more than both a stated margin and a
// multiple of the peers' spread (median absolute deviation). Medians of repeated trials go in,
// so one unlucky trial on a noisy machine moves nothing. Used by `ddx probe compute`,
// `ddx probe memory` (probes/node/) and the pairwise link matrix (probes/bandwidth/).
#include <cstddef>
#include <vector>

namespace ddx {

struct OutlierRule {
  double margin = 0.10;      // flag below (1 - margin) x the peers' median ...
  double mad_factor = 3.0;   // ... and below the median by more than this many scaled MADs
};

struct Outlier {
  size_t index = 0;          // into the values given
  double value = 0;
  double peer_median = 0;    // the median of every other entry
  double threshold = 0;      // the value below which it was flagged
};

// The median (the mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> values);

// The median absolute deviation from the median (unscaled); 0 for none.
double median_absolute_deviation(const std::vector<double>& values);

// The value below which an entry is low against a reference median and its (unscaled) MAD:
// reference - max(margin x reference, mad_factor x 1.4826 x MAD). low_outliers() uses it
// against each entry's peers; `ddx health` against a saved baseline's median and MAD.
double low_threshold(double reference, double mad, const OutlierRule& rule);

// Entries of `values` (higher is better) below their peers: value < peer_median - max(margin x
// peer_median, mad_factor x 1.4826 x MAD(peers)), where 1.4826 x MAD estimates a standard
// deviation. Needs two entries or more; in index order.
std::vector<Outlier> low_outliers(const std::vector<double>& values, const OutlierRule& rule);

}  // namespace ddx
