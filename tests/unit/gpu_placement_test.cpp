// One GPU per local rank for NCCL (ddx/rendezvous/gpu_placement.h): what ddx says before NCCL's own
// "Duplicate GPU detected", and that it says nothing when every rank has its own GPU.
#include <gtest/gtest.h>

#include "ddx/rendezvous/gpu_placement.h"

namespace {

TEST(GpuPlacement, EveryRankWithItsOwnGpuIsFine) {
  EXPECT_EQ(ddx::shared_gpu_problem(0, 1, 1), "");
  EXPECT_EQ(ddx::shared_gpu_problem(3, 8, 8), "");
  EXPECT_EQ(ddx::shared_gpu_problem(1, 2, 4), "");
  EXPECT_EQ(ddx::shared_gpu_problem(0, 2, 0), "");  // no GPU: the callers' own "no GPU" error applies
}

TEST(GpuPlacement, TwoRanksOnOneGpuNameTheGpuTheCauseAndTheFix) {
  EXPECT_EQ(ddx::shared_gpu_problem(1, 2, 1),
            "2 ranks on this host but only 1 GPU is visible: local rank 1 would share GPU 0, and NCCL refuses two "
            "ranks on one GPU (\"Duplicate GPU detected\"); start at most 1 rank per host, or make more GPUs visible "
            "(CUDA_VISIBLE_DEVICES)");
  const std::string eight_on_four = ddx::shared_gpu_problem(6, 8, 4);
  EXPECT_NE(eight_on_four.find("only 4 GPUs are visible: local rank 6 would share GPU 2"), std::string::npos)
      << eight_on_four;
  EXPECT_NE(eight_on_four.find("start at most 4 ranks per host"), std::string::npos) << eight_on_four;
}

}  // namespace
