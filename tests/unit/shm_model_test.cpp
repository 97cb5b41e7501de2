// The /dev/shm model of NCCL's SHM transport (probes/buserror/shm_model.h): segment size from
// the protocol buffers and the NCCL_*BUFFSIZE overrides, the per-pair plan, statfs of a folder.
#include <gtest/gtest.h>

#include "buserror/shm_model.h"
#include "ddx/errors/errors.h"

namespace ddx::shm {
namespace {

TEST(ShmModel, SegmentIsTheSizeNcclReportsAndFollowsBuffsizeOverrides) {
  EXPECT_EQ(segment_bytes({}), 9637888u);  // nccl #342, #1518
  EXPECT_EQ(segment_bytes({{"NCCL_BUFFSIZE", "8388608"}}), 9637888u + 4194304u);
  EXPECT_EQ(segment_bytes({{"NCCL_LL128_BUFFSIZE", "1"}}), 9637888u - 4915200u + 1u);
  EXPECT_THROW(segment_bytes({{"NCCL_BUFFSIZE", "4M"}}), UsageError);
}

TEST(ShmModel, PlanHasOneSegmentPerOrderedLocalPairAndChannel) {
  const ShmPlan p = plan(4, 2, 100);
  EXPECT_EQ(p.segments.size(), 4u * 3u * 2u);
  EXPECT_EQ(p.total_bytes(), 2400u);
  for (int r = 0; r < 4; ++r) {
    const auto mine = p.owned_by(r);
    EXPECT_EQ(mine.size(), 6u);
    for (const auto& s : mine) EXPECT_NE(s.peer, r);
  }
  EXPECT_EQ(p.formula(), "4 local ranks x 3 peers x 2 channels x 100 B = 2400 B (0.0 MiB)");
  EXPECT_EQ(plan(1, 2, 100).total_bytes(), 0u);
}

TEST(ShmModel, SpaceOfDevShmIsATmpfsAndBadPathsAreUsageErrors) {
  const ShmSpace space = space_of("/dev/shm");
  EXPECT_TRUE(space.is_tmpfs);
  EXPECT_GT(space.size_bytes, 0u);
  EXPECT_LE(space.free_bytes, space.size_bytes);
  EXPECT_FALSE(space_of(DDX_BINARY_DIR).is_tmpfs);
  EXPECT_THROW(space_of("/no/such/folder"), UsageError);
}

TEST(ShmModel, FixesNameEveryRemedyWithHeadroom) {
  const auto lines = fixes(231309312);  // 220.6 MiB
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("--shm-size=2g"), std::string::npos);
  EXPECT_NE(lines[1].find("medium: Memory, sizeLimit: 2Gi"), std::string::npos);
  EXPECT_NE(lines[2].find("NCCL_SHM_DISABLE=1"), std::string::npos);
  EXPECT_NE(lines[3].find("fallocate"), std::string::npos);
}

}  // namespace
}  // namespace ddx::shm
