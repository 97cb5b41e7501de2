// The collective layer's counters (ddx/watchdog/comm_counters.h): nccl-tests' size per op kind, mesh
// group labels, and per-step differences. The counts of real ops are checked end to end by
// tp_test (bytes per step against a formula) and two_d_test.
#include <gtest/gtest.h>

#include "ddx/watchdog/comm_counters.h"

namespace ddx {
namespace {

OpRecord record(OpType op, const std::string& group, std::vector<int64_t> in, std::vector<int64_t> out, int64_t element) {
  OpRecord r;
  r.op = op;
  r.group = group;
  r.in_shape = in;
  r.out_shape = out;
  r.numel = 1;
  for (int64_t d : in) r.numel *= d;
  r.bytes = r.numel * element;
  return r;
}

TEST(CommCounters, BytesAreNcclTestsSizeOfEachCall) {
  // 4 ranks, float32: all_reduce and all_to_all their tensor, all_gather the gathered output,
  // reduce_scatter the full input, barriers nothing.
  EXPECT_EQ(payload_bytes(record(OpType::AllReduce, "world", {6, 5}, {6, 5}, 4)), 120);
  EXPECT_EQ(payload_bytes(record(OpType::AllGather, "world", {6, 5}, {24, 5}, 4)), 480);
  EXPECT_EQ(payload_bytes(record(OpType::ReduceScatter, "world", {24, 5}, {6, 5}, 4)), 480);
  EXPECT_EQ(payload_bytes(record(OpType::AllToAll, "world", {8}, {8}, 8)), 64);
  EXPECT_EQ(payload_bytes(record(OpType::Send, "world", {3}, {3}, 2)), 6);
  OpRecord barrier;
  barrier.op = OpType::Barrier;
  EXPECT_EQ(payload_bytes(barrier), 0);
}

TEST(CommCounters, MeshGroupsCountUnderTheirDimension) {
  EXPECT_EQ(comm_label("dp2xtp2.tp.1"), "tp");
  EXPECT_EQ(comm_label("pp2xdp1xtp2.dp.0"), "dp");
  EXPECT_EQ(comm_label("world"), "world");
  EXPECT_EQ(comm_label("odd"), "odd");
  EXPECT_EQ(comm_label("a.b.c.d"), "a.b.c.d");
}

TEST(CommCounters, AStepIsTheDifferenceOfTwoSnapshots) {
  count_op(record(OpType::AllReduce, "unit.x.0", {10}, {10}, 4));  // before the "step"
  const CommCounts before = comm_counts();
  count_op(record(OpType::AllReduce, "unit.x.0", {10}, {10}, 4));
  count_op(record(OpType::AllReduce, "unit.x.1", {2}, {2}, 8));  // another slice of dimension x
  count_op(record(OpType::AllGather, "unit-world", {3}, {6}, 4));
  const CommCounts step = comm_counts_since(before, comm_counts());
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step.at("x").at("all_reduce").calls, 2);
  EXPECT_EQ(step.at("x").at("all_reduce").bytes, 40 + 16);
  EXPECT_EQ(step.at("unit-world").at("all_gather").bytes, 24);
  EXPECT_EQ(total_bytes(step), 80);
  EXPECT_TRUE(comm_counts_since(comm_counts(), comm_counts()).empty());
}

}  // namespace
}  // namespace ddx
