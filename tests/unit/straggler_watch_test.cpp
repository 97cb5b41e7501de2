// The straggler warning on synthetic busy-time series: the imbalance a shared host leaves for a
// hundred milliseconds at a time stays quiet, a rank slow over the whole window is named once,
// and named again only after it recovered and fell behind anew.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "observe/straggler_watch.h"

namespace ddx::train {
namespace {

// Feeds logged steps first..first+steps-1, one every `step_s` seconds: every rank busy 5 ms,
// except `slow_rank` at `ratio` times that on the steps `slow(step)` says; returns the warnings.
template <typename Slow>
std::vector<std::string> feed(StragglerWatch& watch, int ranks, int first, int steps, double step_s, int slow_rank,
                              double ratio, Slow slow) {
  std::vector<std::string> warnings;
  for (int step = first; step < first + steps; ++step) {
    std::vector<double> busy(ranks, 0.005);
    if (slow(step)) busy[slow_rank] *= ratio;
    if (auto w = watch.observe(step, busy, step * step_s); !w.empty()) warnings.push_back(w);
  }
  return warnings;
}

auto always = [](int) { return true; };

TEST(StragglerWatch, ImbalanceForAFewHundredMillisecondsDoesNotWarn) {
  // What 4 ranks on 2 loaded cores did under the old rule (3 logged steps in a row): one rank
  // 2.7x behind for 20 steps of 10 ms (200 ms), then even again for a second.
  StragglerWatch watch(2.0, 8, 2.0);
  EXPECT_TRUE(feed(watch, 4, 1, 600, 0.010, 0, 2.7, [](int step) { return step % 120 < 20; }).empty());
  // Single steps 10x slow now and then.
  StragglerWatch spikes(2.0, 8, 2.0);
  EXPECT_TRUE(feed(spikes, 2, 1, 600, 0.010, 1, 10.0, [](int step) { return step % 13 == 0; }).empty());
}

TEST(StragglerWatch, ARankSlowForAWholeWindowIsNamedOnceThenAgainAfterRecovering) {
  StragglerWatch watch(2.0, 8, 2.0);
  auto warnings = feed(watch, 4, 1, 400, 0.010, 2, 3.0, always);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "straggler: rank 2 was 3.0x slower than the median rank (15.0 ms vs 5.0 ms busy per step over the last 201 "
            "logged steps, 2.0 s), up to step 201");
  // It recovers for a window, then falls behind again: a second warning.
  EXPECT_TRUE(feed(watch, 4, 401, 400, 0.010, 2, 1.0, always).empty());
  warnings = feed(watch, 4, 801, 400, 0.010, 2, 3.0, always);
  ASSERT_EQ(warnings.size(), 1u);
}

TEST(StragglerWatch, LongStepsNeedEightOfThemAndShortWindowsFewerSeconds) {
  // 1 s steps: the 2 s window is reached at 3 steps, but one long step is never a straggler: 8.
  StragglerWatch slow_steps(2.0, 8, 2.0);
  auto warnings = feed(slow_steps, 2, 1, 20, 1.0, 1, 10.0, always);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("over the last 8 logged steps, 7.0 s), up to step 8"), std::string::npos) << warnings[0];
  // The fault matrix's planted 10x at factor 5 over half a second.
  StragglerWatch matrix(5.0, 8, 0.5);
  EXPECT_EQ(feed(matrix, 2, 1, 16, 0.1, 1, 10.0, always).size(), 1u);
}

TEST(StragglerWatch, FactorZeroIsOffAndOneRankHasNoMedianToCompareWith) {
  StragglerWatch off(0.0, 8, 2.0);
  EXPECT_TRUE(feed(off, 2, 1, 500, 0.01, 1, 10.0, always).empty());
  StragglerWatch alone(2.0, 8, 2.0);
  EXPECT_TRUE(feed(alone, 1, 1, 500, 0.01, 0, 10.0, always).empty());
}

}  // namespace
}  // namespace ddx::train
