// The parallel dimensions a run gets from its layout, the degree flags and the world size,
// resolved once before any strategy exists (trainers/strategies/parallel_dims.h): each layout's
// defaults, and the one-line errors for a degree that is missing or does not divide the world.
#include <gtest/gtest.h>

#include <string>

#include "ddx/errors/errors.h"
#include "strategies/parallel_dims.h"

namespace ddx::train {
namespace {

LayoutFlags flags(int64_t tp, int64_t pp, bool dp_replicate = false) { return {tp, pp, dp_replicate}; }

// The UsageError's text, or "" when resolving succeeds.
std::string error_of(Layout layout, const LayoutFlags& f, int world) {
  try {
    resolve_parallel_dims(layout, f, false, world);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelDims, DataParallelIsTheWholeWorld) {
  const ParallelDims d = resolve_parallel_dims(Layout::DataParallel, {}, false, 4);
  EXPECT_EQ(d.world, 4);
  EXPECT_EQ(d.pp, 0);
  EXPECT_EQ(d.tp, 0);
  EXPECT_EQ(d.dp(), 4);
}

TEST(ParallelDims, TensorParallelDefaultsToTheWorldAndRefusesAnythingElse) {
  const ParallelDims d = resolve_parallel_dims(Layout::TensorParallel, {}, true, 4);
  EXPECT_EQ(d.tp, 4);
  EXPECT_EQ(d.dp(), 1);
  EXPECT_TRUE(d.sequence_parallel);
  EXPECT_EQ(resolve_parallel_dims(Layout::TensorParallel, flags(4, 0), false, 4).tp, 4);
  EXPECT_EQ(error_of(Layout::TensorParallel, flags(2, 0), 4),
            "--tp 2 does not match the world size 4: --strategy tp puts every rank in one tensor-parallel group "
            "(--strategy 2d adds data parallelism)");
}

TEST(ParallelDims, TwoDNeedsATpThatDividesTheWorld) {
  const ParallelDims d = resolve_parallel_dims(Layout::TwoD, flags(2, 0, true), false, 8);
  EXPECT_EQ(d.tp, 2);
  EXPECT_EQ(d.dp(), 4);
  EXPECT_TRUE(d.dp_replicate);
  EXPECT_EQ(error_of(Layout::TwoD, flags(0, 0), 4),
            "--strategy 2d needs --tp M: the ranks of each tensor-parallel group (data parallelism over world / M)");
  EXPECT_EQ(error_of(Layout::TwoD, flags(3, 0), 4), "--tp 3 does not divide the world size 4: --strategy 2d needs world = dp x tp");
}

TEST(ParallelDims, PipelineDefaultsToEveryRankLeftByTp) {
  // No flags: every rank a stage, no data parallelism, no TP dimension.
  ParallelDims d = resolve_parallel_dims(Layout::Pipeline, {}, false, 4);
  EXPECT_EQ(d.pp, 4);
  EXPECT_EQ(d.tp, 0);
  EXPECT_EQ(d.dp(), 1);
  // --tp 2 on 8 ranks: 4 stages of TP pairs.
  d = resolve_parallel_dims(Layout::Pipeline, flags(2, 0), false, 8);
  EXPECT_EQ(d.pp, 4);
  EXPECT_EQ(d.tp, 2);
  EXPECT_EQ(d.dp(), 1);
  // --pp 2 --tp 2 on 8 ranks: 3D, two data-parallel replicas.
  d = resolve_parallel_dims(Layout::Pipeline, flags(2, 2), false, 8);
  EXPECT_EQ(d.pp, 2);
  EXPECT_EQ(d.tp, 2);
  EXPECT_EQ(d.dp(), 2);
  // --tp 1 is no TP dimension at all (the mesh then has no tp group to count traffic on).
  d = resolve_parallel_dims(Layout::Pipeline, flags(1, 2), false, 4);
  EXPECT_EQ(d.tp, 0);
  EXPECT_EQ(d.dp(), 2);
}

TEST(ParallelDims, PipelineDegreesThatDoNotDivideTheWorldAreOneLine) {
  EXPECT_EQ(error_of(Layout::Pipeline, flags(0, 3), 4), "--pp 3 does not divide the world size 4");
  EXPECT_EQ(error_of(Layout::Pipeline, flags(2, 2), 6), "--pp 2 x --tp 2 = 4 does not divide the world size 6");
  // --tp alone: the stages default to what is left, at least one.
  EXPECT_EQ(error_of(Layout::Pipeline, flags(4, 0), 6), "--pp 1 x --tp 4 = 4 does not divide the world size 6");
  EXPECT_EQ(error_of(Layout::Pipeline, flags(2, 3), 6), "") << "6 ranks hold --pp 3 x --tp 2 exactly";
}

}  // namespace
}  // namespace ddx::train
