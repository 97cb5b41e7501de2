#pragma once
// Two curves of one quantity per step (a loss, a gradient norm) compared point by point, steps
// aligned by number: where they first differ beyond a tolerance, and by how much at most. The
// one comparison behind `ddx parity` (each strategy against the single-device run) and
// `ddx compare` (curves from any run: ddx, PyTorch, another cluster). No LibTorch.
#include <cstdint>
#include <functional>
#include <vector>

namespace ddx {

struct CurvePoint {
  int64_t step = 0;
  double value = 0;
};

// A point agrees when |value - reference| <= abs + rel x |reference| (numpy's isclose).
struct PointTolerance {
  double abs = 0;
  double rel = 0;
};

struct CurveDiff {
  std::vector<int64_t> steps;        // the steps both curves have, in order
  std::vector<double> abs_diff;      // per step of `steps`; infinite where the run's value is not finite
  std::vector<double> rel_diff;      // |diff| / |reference| (reference clamped away from 0)
  int64_t first_bad_step = -1;       // first step beyond its tolerance; -1: none
  double max_abs = 0, max_rel = 0;
  int64_t max_abs_step = -1;
  double margin = 0;                 // the largest |diff| / tolerance: below 1 agrees
  int64_t only_in_reference = 0;     // steps one curve has and the other lacks
  int64_t only_in_run = 0;
};

// `tolerance_at(i)` is the tolerance of the i-th common step (parity widens it per step).
CurveDiff diff_curves(const std::vector<CurvePoint>& reference, const std::vector<CurvePoint>& run,
                      const std::function<PointTolerance(size_t)>& tolerance_at);

}  // namespace ddx
