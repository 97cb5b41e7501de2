// Pipeline parallelism with real processes (Gloo over loopback): `ddx train --strategy pp` end to
// end against the single-device loss curve and final weights for each schedule at 2 and 4
// ranks, with hand-placed cuts, accumulation and clipping, and pp x dp; checkpoints that
// resume bit-identically and load at another layout (pp2 -> single, single -> pp2 x dp2); the
// schedule picture and bubble metrics; bad input. The debug-pp model is the debug GPT-2 (tied
// embedding: the first and last stage share it) with 8 blocks.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train_fixture.h"

namespace ddx::testing {
namespace {

// Global batch of 8 sequences in every run.
class PpTest : public TrainTest {
 protected:
  RunResult single(const std::string& name, std::vector<std::string> extra = {"-b", "8"}) {
    std::vector<std::string> flags = {"-m", "debug-pp", "--max-steps", "8", "--final-weights", weights(name)};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return train(0, name, flags);
  }
  RunResult pp(int ranks, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--strategy", "pp", "-m", "debug-pp", "--max-steps", "8",
                                      "--final-weights", weights(name)};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return train(ranks, name, flags);
  }
  void expect_same_norms(const std::string& a, const std::string& b) {
    auto ra = records(a), rb = records(b);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      const double na = ra[i].at("grad_norm").get<double>(), nb = rb[i].at("grad_norm").get<double>();
      EXPECT_LE(std::fabs(na - nb) / na, 1e-5) << b << " step " << i + 1;
    }
  }
};

TEST_F(PpTest, EverySchedulesMatchesSingleDevice) {
  ASSERT_EQ(single("single").exit_code, 0);
  struct Case {
    int ranks;
    std::string name;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {2, "gpipe_x2", {"-b", "8", "--pp-schedule", "gpipe", "--microbatches", "4"}},
      {2, "1f1b_x2_split", {"-b", "8", "--pp-schedule", "1f1b", "--microbatches", "8", "--pp-split", "3"}},
      {4, "1f1b_x4", {"-b", "8", "--pp-schedule", "1f1b", "--microbatches", "4"}},
      {4, "interleaved_x4", {"-b", "8", "--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages", "2",
                             "--microbatches", "4"}},
      {4, "pp2_dp2", {"-b", "4", "--pp", "2", "--microbatches", "2"}},
  };
  for (const Case& c : cases) {
    auto r = pp(c.ranks, c.name, c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    expect_same_run("single", c.name, 1e-5);
    expect_same_norms("single", c.name);
  }
  // Each stage holds its blocks only: at 4 stages about a quarter of the parameters (the tied
  // embedding is on the first and the last stage).
  const double full = records("single").back().at("param_bytes").get<double>();
  const double quarter = records("1f1b_x4").back().at("param_bytes").get<double>();
  EXPECT_LT(quarter, full / 2);
}

TEST_F(PpTest, AccumulationAndClippingMatchSingleDevice) {
  const std::vector<std::string> accum = {"-b", "4", "--grad-accum", "2", "--max-grad-norm", "0.5"};
  ASSERT_EQ(single("single", accum).exit_code, 0);
  auto r = pp(2, "accum_x2", {"-b", "4", "--grad-accum", "2", "--max-grad-norm", "0.5", "--microbatches", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run("single", "accum_x2", 1e-5);
  expect_same_norms("single", "accum_x2");
}

TEST_F(PpTest, CheckpointsResumeBitIdenticalAndLoadAtOtherLayouts) {
  const std::vector<std::string> common = {"--strategy", "pp", "-m", "debug-pp", "-b", "4", "--microbatches", "2",
                                           "--ckpt-freq", "3"};
  ASSERT_NO_FATAL_FAILURE(expect_resume_is_bit_identical(2, common, "ck"));

  // pp2 -> single, then single -> pp2 x dp2.
  auto on_single = train(0, "on_single", {"-m", "debug-pp", "-b", "4", "-e", "ck", "--max-steps", "9", "--ckpt-freq", "3"});
  ASSERT_EQ(on_single.exit_code, 0) << on_single.output;
  EXPECT_NE(on_single.output.find("resuming from"), std::string::npos) << on_single.output;
  auto on_pp_dp = train(4, "on_pp_dp", {"--strategy", "pp", "--pp", "2", "-m", "debug-pp", "-b", "2", "-e", "ck",
                                        "--max-steps", "12", "--ckpt-freq", "3"});
  ASSERT_EQ(on_pp_dp.exit_code, 0) << on_pp_dp.output;
  EXPECT_NE(on_pp_dp.output.find("resuming from"), std::string::npos) << on_pp_dp.output;
}

TEST_F(PpTest, TracePictureAndBubbleMetrics) {
  const std::string svg = (dir_ / "pipe.svg").string();
  auto r = train(2, "traced", {"--strategy", "pp", "-m", "debug-pp", "-b", "8", "--microbatches", "4", "--max-steps", "3",
                               "--pp-trace", svg});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(svg);
  ASSERT_TRUE(in) << svg;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("1f1b: p=2, m=4, 3 steps"), std::string::npos) << text.str().substr(0, 400);
  EXPECT_NE(text.str().find("theoretical 20.0%"), std::string::npos);
  // 2 ranks x 4 micro-batches x (forward + backward) x 3 steps boxes.
  size_t boxes = 0;
  for (size_t at = text.str().find("<title>"); at != std::string::npos; at = text.str().find("<title>", at + 1)) ++boxes;
  EXPECT_EQ(boxes, 48u);
  for (const auto& record : records("traced")) {
    EXPECT_DOUBLE_EQ(record.at("pp_bubble_theoretical").get<double>(), 0.2);
    EXPECT_GT(record.at("pp_bubble").get<double>(), 0.0);
    EXPECT_LT(record.at("pp_bubble").get<double>(), 1.0);
  }
}

TEST_F(PpTest, BadLayoutsFailWithOneLine) {
  // Under ddx launch each worker exits 2 (usage) and the launcher reports the failure.
  auto usage_failure = [](const RunResult& r) { return r.exit_code != 0 && r.output.find("exit 2") != std::string::npos; };
  auto world = train(2, "world", {"--strategy", "pp", "--pp", "3", "-m", "debug-pp", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(world)) << world.output;
  EXPECT_NE(world.output.find("--pp 3 does not divide the world size 2"), std::string::npos) << world.output;
  auto blocks = train(4, "blocks", {"--strategy", "pp", "-m", "debug", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(blocks)) << blocks.output;
  EXPECT_NE(blocks.output.find("--pp 4 exceeds the 3 blocks of model debug"), std::string::npos) << blocks.output;
  auto virtual_stages = train(2, "virtual", {"--strategy", "pp", "-m", "debug-pp", "--pp-schedule", "interleaved-1f1b",
                                             "--pp-virtual-stages", "5", "--microbatches", "2", "-b", "2",
                                             "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(virtual_stages)) << virtual_stages.output;
  EXPECT_NE(virtual_stages.output.find("--pp 2 x --pp-virtual-stages 5 = 10 stages exceeds the 8 blocks of model debug-pp"),
            std::string::npos)
      << virtual_stages.output;
  auto groups = train(2, "groups", {"--strategy", "pp", "-m", "debug-pp", "--pp-schedule", "interleaved-1f1b",
                                    "--pp-virtual-stages", "2", "--microbatches", "3", "-b", "3", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(groups)) << groups.output;
  EXPECT_NE(groups.output.find("--pp-schedule interleaved-1f1b needs the step's micro-batches (--microbatches x "
                               "--grad-accum = 3) to be a multiple of --pp 2"),
            std::string::npos)
      << groups.output;
  // Checked before any rank starts: exit 2 with one line.
  auto one_line = [](const RunResult& r, const std::string& message) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(r.output, "ddx: error: " + message + "\n");
  };
  one_line(train(0, "micro", {"--strategy", "pp", "-m", "debug-pp", "-b", "8", "--microbatches", "3"}),
           "--microbatches 3 does not divide -b 8");
  one_line(train(0, "v1f1b", {"--strategy", "pp", "-m", "debug-pp", "--pp-virtual-stages", "2"}),
           "--pp-virtual-stages 2 needs --pp-schedule interleaved-1f1b (1f1b runs one stage per rank)");
  one_line(train(0, "sched", {"--strategy", "pp", "-m", "debug-pp", "--pp-schedule", "zb"}),
           "--pp-schedule zb is not one of: gpipe, 1f1b, interleaved-1f1b");
  one_line(train(0, "other", {"--strategy", "ddp", "--microbatches", "2"}),
           "--microbatches applies to --strategy pp, not ddp");
  auto split = train(2, "split", {"--strategy", "pp", "-m", "debug-pp", "--pp-split", "9", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(split)) << split.output;
  EXPECT_NE(split.output.find("--pp-split 9: every cut must be a block index above the previous one and below 8"),
            std::string::npos)
      << split.output;
}

}  // namespace
}  // namespace ddx::testing
