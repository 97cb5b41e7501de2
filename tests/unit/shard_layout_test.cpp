// FSDP's shard layout: torch.chunk's row split (uneven and empty shards), padding, and the
// flat offsets of a unit.
#include <gtest/gtest.h>

#include <stdexcept>

#include "checkpoint/shard_layout.h"

namespace ddx::train {
namespace {

TEST(FsdpLayout, RowsFollowTorchChunk) {
  // torch.chunk(torch.arange(259), 4): 65, 65, 65, 64 rows.
  UnitLayout u = make_unit_layout("u", {{"w", {259, 35}}}, 4);
  const ShardedParameter& p = u.parameters[0];
  EXPECT_EQ(p.rows_per_rank, 65);
  EXPECT_EQ(p.row_begin(3), 195);
  EXPECT_EQ(p.row_end(3), 259);
  EXPECT_EQ(p.owned_rows(3), 64);
  EXPECT_EQ(u.shard_numel, 65 * 35);
  EXPECT_EQ(u.full_numel, 259 * 35);
}

TEST(FsdpLayout, ShortDimZeroLeavesLateRanksEmpty) {
  // torch.chunk(torch.arange(5), 4) gives 3 chunks of 2, 2, 1: the fourth rank owns nothing.
  UnitLayout u = make_unit_layout("u", {{"b", {5}}}, 4);
  const ShardedParameter& p = u.parameters[0];
  EXPECT_EQ(p.rows_per_rank, 2);
  EXPECT_EQ(p.owned_rows(0), 2);
  EXPECT_EQ(p.owned_rows(2), 1);
  EXPECT_EQ(p.owned_rows(3), 0);
  EXPECT_EQ(p.row_begin(3), 5);
  UnitLayout two = make_unit_layout("u", {{"c", {2, 3}}}, 4);
  EXPECT_EQ(two.parameters[0].owned_rows(1), 1);
  EXPECT_EQ(two.parameters[0].owned_rows(2), 0);
}

TEST(FsdpLayout, FlatOffsetsConcatenatePaddedShards) {
  UnitLayout u = make_unit_layout("block", {{"a", {7, 3}}, {"b", {5}}, {"c", {8, 2}}}, 2);
  ASSERT_EQ(u.parameters.size(), 3u);
  EXPECT_EQ(u.parameters[0].shard_offset, 0);
  EXPECT_EQ(u.parameters[1].shard_offset, 4 * 3);          // a: 4 rows of 3 per rank
  EXPECT_EQ(u.parameters[2].shard_offset, 4 * 3 + 3);      // b: 3 rows per rank
  EXPECT_EQ(u.shard_numel, 4 * 3 + 3 + 4 * 2);
  EXPECT_EQ(u.parameters[2].full_offset, 21 + 5);
  EXPECT_EQ(u.full_numel, 21 + 5 + 16);
  // Every row of every parameter belongs to exactly one rank.
  for (const auto& p : u.parameters) {
    int64_t covered = 0;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(p.row_begin(r), covered);
      covered += p.owned_rows(r);
    }
    EXPECT_EQ(covered, p.rows);
  }
}

TEST(FsdpLayout, OneRankHoldsEverything) {
  UnitLayout u = make_unit_layout("u", {{"a", {7, 3}}}, 1);
  EXPECT_EQ(u.shard_numel, u.full_numel);
  EXPECT_EQ(u.parameters[0].owned_rows(0), 7);
}

TEST(FsdpLayout, ScalarsAndBadWorldSizesAreRefused) {
  EXPECT_THROW(make_unit_layout("u", {{"s", {}}}, 2), std::invalid_argument);
  EXPECT_THROW(make_unit_layout("u", {{"a", {3}}}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace ddx::train
