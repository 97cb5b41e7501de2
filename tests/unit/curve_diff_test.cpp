// The curve comparison behind ddx parity and ddx compare (harness/parity/curve_diff.h).
#include <gtest/gtest.h>

#include <cmath>

#include "harness/parity/curve_diff.h"

namespace ddx {
namespace {

PointTolerance rel(double r) { return {0, r}; }

TEST(CurveDiff, StepsAlignByNumberAndTheFirstBadStepIsNamed) {
  const std::vector<CurvePoint> ref = {{1, 10.0}, {2, 9.0}, {3, 8.0}, {4, 7.0}};
  const std::vector<CurvePoint> run = {{2, 9.0}, {3, 8.0001}, {4, 7.5}, {5, 6.0}};
  const CurveDiff d = diff_curves(ref, run, [](size_t) { return rel(1e-3); });
  EXPECT_EQ(d.steps, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(d.first_bad_step, 4);  // step 3's 1.25e-5 relative is inside 1e-3
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_EQ(d.max_abs_step, 4);
  EXPECT_EQ(d.only_in_reference, 1);
  EXPECT_EQ(d.only_in_run, 1);
  EXPECT_NEAR(d.margin, 0.5 / 7e-3, 1e-9);
}

TEST(CurveDiff, AbsoluteAndRelativeToleranceAddUp) {
  const std::vector<CurvePoint> ref = {{1, 1.0}}, run = {{1, 1.015}};
  EXPECT_EQ(diff_curves(ref, run, [](size_t) { return PointTolerance{0.01, 0.0}; }).first_bad_step, 1);
  EXPECT_EQ(diff_curves(ref, run, [](size_t) { return PointTolerance{0.01, 0.01}; }).first_bad_step, -1);
}

TEST(CurveDiff, ANonFiniteValueAlwaysDiffers) {
  const std::vector<CurvePoint> ref = {{1, 1.0}, {2, 1.0}}, run = {{1, 1.0}, {2, NAN}};
  const CurveDiff d = diff_curves(ref, run, [](size_t) { return PointTolerance{1e9, 1e9}; });
  EXPECT_EQ(d.first_bad_step, 2);
  EXPECT_TRUE(std::isinf(d.rel_diff[1]));
}

TEST(CurveDiff, PerStepTolerancesAreHonoured) {
  const std::vector<CurvePoint> ref = {{1, 1.0}, {2, 1.0}}, run = {{1, 1.01}, {2, 1.01}};
  const CurveDiff d = diff_curves(ref, run, [](size_t i) { return rel(i == 0 ? 0.1 : 1e-3); });
  EXPECT_EQ(d.first_bad_step, 2);
}

}  // namespace
}  // namespace ddx
