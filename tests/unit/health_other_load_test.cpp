// Other processes' CPU use while `ddx health` measures (probes/health/other_load.h): the two
// /proc files parsed from planted text, the share worked out from two readings, and the row that
// leaves a busy node's figures unjudged while a quiet node's stay judged.
#include <gtest/gtest.h>

#include "health/other_load.h"

namespace ddx::health {
namespace {

// Two CPUs; the aggregate line's user nice system idle iowait irq softirq steal.
std::string proc_stat(uint64_t user, uint64_t idle, uint64_t steal = 0) {
  return "cpu  " + std::to_string(user) + " 0 0 " + std::to_string(idle) + " 0 0 0 " + std::to_string(steal) +
         " 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\nctxt 4\n";
}

// A command name with spaces and a ')' of its own: the fields are counted from the last ')'.
std::string self_stat(uint64_t utime, uint64_t stime, uint64_t cutime, uint64_t cstime) {
  return "4242 (ddx (health) x) R 1 4242 4242 0 -1 4194560 100 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " " + std::to_string(cutime) + " " + std::to_string(cstime) + " 20 0 3 0 99\n";
}

Check figures_row() {
  Check c;
  c.name = "gemm cpu fp32";
  c.metrics.push_back({"ddx_health_gemm_tflops", 0.03, {{"device", "cpu"}, {"dtype", "fp32"}}, true});
  return c;
}

TEST(HealthOtherLoad, ParsesBothFilesCountingFromTheLastParenthesis) {
  const auto t = parse_cpu_ticks(proc_stat(100, 900, 20), self_stat(10, 5, 30, 7));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->busy, 120u);   // user + steal: another tenant's time is not ours either
  EXPECT_EQ(t->total, 1020u);
  EXPECT_EQ(t->ours, 52u);    // utime + stime + the waited-for children's
  EXPECT_EQ(t->cpus, 2);
}

TEST(HealthOtherLoad, TextWithoutTheFieldsIsNoReading) {
  EXPECT_FALSE(parse_cpu_ticks("", self_stat(1, 1, 1, 1)).has_value());
  EXPECT_FALSE(parse_cpu_ticks("cpu  1 2 3\ncpu0 1 2 3 4 5 6 7\n", self_stat(1, 1, 1, 1)).has_value());
  EXPECT_FALSE(parse_cpu_ticks(proc_stat(1, 1), "4242 (ddx) R 1 2").has_value());
  EXPECT_FALSE(parse_cpu_ticks(proc_stat(1, 1), "4242 ddx R").has_value());
}

TEST(HealthOtherLoad, OthersAreTheBusyTimeThatWasNotOurs) {
  const CpuTicks before{1000, 5000, 100, 2};
  // 1000 ticks passed; 700 were busy, 200 of them ours: others took 500 of 1000, half the node.
  const CpuTicks after{1700, 6000, 300, 2};
  const OtherLoad load = other_load(before, after);
  EXPECT_DOUBLE_EQ(load.share, 0.5);
  EXPECT_DOUBLE_EQ(load.cpus, 1.0);
  EXPECT_TRUE(load.busy());
  // Only ourselves busy: nobody else.
  EXPECT_DOUBLE_EQ(other_load(before, {1200, 6000, 300, 2}).share, 0.0);
  EXPECT_FALSE(other_load(before, {1200, 6000, 300, 2}).busy());
  // Just over and just under a quarter.
  EXPECT_TRUE(other_load(before, {1460, 6000, 300, 2}).busy());
  EXPECT_FALSE(other_load(before, {1440, 6000, 300, 2}).busy());
  // A clock that did not move is no reading of anything.
  EXPECT_DOUBLE_EQ(other_load(before, before).share, 0.0);
}

TEST(HealthOtherLoad, ABusyNodesFiguresAreReportedButNotJudged) {
  std::vector<Check> measured{figures_row()};
  const Check row = other_load_row(CpuTicks{1000, 5000, 100, 2}, CpuTicks{1700, 6000, 300, 2}, measured);
  EXPECT_EQ(row.name, "other load");
  EXPECT_EQ(row.state, State::Ok);
  EXPECT_FALSE(row.skipped);
  EXPECT_EQ(row.value,
            "other processes used 1.00 of 2 CPUs (50%) while the figures were measured: over 25%, so no figure is "
            "judged (a busy node's rates measure the load, not the node)");
  ASSERT_EQ(row.metrics.size(), 1u);
  EXPECT_EQ(row.metrics[0].name, "ddx_health_other_cpus_used");
  EXPECT_DOUBLE_EQ(row.metrics[0].value, 1.0);
  EXPECT_FALSE(row.metrics[0].judged);
  ASSERT_EQ(measured[0].metrics.size(), 1u);
  EXPECT_FALSE(measured[0].metrics[0].judged);
  EXPECT_DOUBLE_EQ(measured[0].metrics[0].value, 0.03);
}

TEST(HealthOtherLoad, AQuietNodesFiguresStayJudged) {
  std::vector<Check> measured{figures_row()};
  const Check row = other_load_row(CpuTicks{1000, 5000, 100, 2}, CpuTicks{1300, 6000, 300, 2}, measured);
  EXPECT_EQ(row.value, "other processes used 0.20 of 2 CPUs (10%) while the figures were measured");
  EXPECT_TRUE(measured[0].metrics[0].judged);
}

TEST(HealthOtherLoad, NoReadingIsASkippedRowAndTheFiguresStayJudged) {
  std::vector<Check> measured{figures_row()};
  const Check row = other_load_row(std::nullopt, CpuTicks{1300, 6000, 300, 2}, measured);
  EXPECT_TRUE(row.skipped);
  EXPECT_TRUE(measured[0].metrics[0].judged);
}

TEST(HealthOtherLoad, ThisMachinesFilesAreRead) {
  const auto t = read_cpu_ticks();
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(t->total, 0u);
  EXPECT_GE(t->cpus, 1);
}

}  // namespace
}  // namespace ddx::health
