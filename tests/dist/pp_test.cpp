// Pipeline parallelism with real processes (Gloo over loopback): `ddx train --strategy pp` end to
// end against the single-device loss curve and final weights for each schedule at 2 and 4
// ranks, with hand-placed cuts, accumulation and clipping, and pp x dp (FSDP on the dp
// dimension, or replicas with --dp-replicate) with what a step moves on the dp dimension;
// sharded checkpoints that resume bit-identically, load at another layout (pp2 -> single,
// single -> pp2 x dp2, pp2 x fsdp2 -> single) and consolidate; the schedule picture, bubble and
// in-flight metrics; bad input. The debug-pp model is the debug GPT-2 (tied
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
  // The single-device run (global batch 4) resumed from `step3`, a step-3 checkpoint of run
  // `straight` (6 steps), continues its curve within the parity tolerance.
  void expect_single_device_continues(const std::string& straight, const fs::path& step3,
                                      const std::string& model = "debug-pp") {
    fs::create_directories(dir_ / "out" / "to_single" / "checkpoints");
    fs::copy(step3, dir_ / "out" / "to_single" / "checkpoints" / "step_000000003", fs::copy_options::recursive);
    auto on_single = train(0, "on_single", {"-m", model, "-b", "4", "-e", "to_single", "--max-steps", "6",
                                            "--final-weights", weights("on_single")});
    ASSERT_EQ(on_single.exit_code, 0) << on_single.output;
    EXPECT_NE(on_single.output.find("resuming from"), std::string::npos) << on_single.output;
    expect_same_run(straight, "on_single", 1e-5, 3);
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
      {4, "pp2_dp2", {"-b", "4", "--pp", "2", "--microbatches", "2", "--dp-replicate"}},
  };
  for (const Case& c : cases) {
    auto r = pp(c.ranks, c.name, c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    expect_same_run("single", c.name, 1e-5);
    expect_same_norms("single", c.name);
  }
  // What each pipeline rank kept between forward and backward (the metrics' in-flight counts):
  // GPipe every micro-batch, 1F1B at most p - r on rank r. The boundary activations held per
  // micro-batch: the output on the first stage, input and output between, the input on the last.
  auto in_flight = [&](const std::string& name, int rank) {
    return records(name).back().at("pp_peak_inflight_rank" + std::to_string(rank)).get<double>();
  };
  auto bytes = [&](const std::string& name, int rank) {
    return records(name).back().at("pp_peak_activation_bytes_rank" + std::to_string(rank)).get<double>();
  };
  for (int r = 0; r < 2; ++r) EXPECT_EQ(in_flight("gpipe_x2", r), 4) << "rank " << r;
  for (int r = 0; r < 2; ++r) EXPECT_EQ(in_flight("1f1b_x2_split", r), 2 - r) << "rank " << r;  // of 8
  for (int r = 0; r < 4; ++r) EXPECT_EQ(in_flight("1f1b_x4", r), 4 - r) << "rank " << r;
  const double per_tensor = bytes("1f1b_x4", 0) / in_flight("1f1b_x4", 0);
  EXPECT_GT(per_tensor, 0);
  for (int r = 1; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(bytes("1f1b_x4", r), (r < 3 ? 2 : 1) * per_tensor * in_flight("1f1b_x4", r)) << "rank " << r;
  }
  // Each stage holds its blocks only: at 4 stages about a quarter of the parameters (the tied
  // embedding is on the first and the last stage).
  const double full = records("single").back().at("param_bytes").get<double>();
  const double quarter = records("1f1b_x4").back().at("param_bytes").get<double>();
  EXPECT_LT(quarter, full / 2);
}

// pp 2 x dp 2 with FSDP (the default) on the data-parallel dimension: each stage's units
// sharded over its dp group, against the single-device run for each schedule and with FSDP's
// tuning flags; and what a step moves over the dp group (rank 0's counts in the metrics): every
// unit of the rank reduce-scattered exactly once per step however many micro-batches ran (the
// gradients accumulate unsharded until the unit's last backward), those reduce-scatters being
// the rank's shards times the dp size in bytes, and no all-reduce of gradients, which the
// replicated run (--dp-replicate) does in DDP's buckets instead (one, at debug-pp's size).
TEST_F(PpTest, FsdpOnTheDataParallelDimensionMatchesSingleDevice) {
  ASSERT_EQ(single("single").exit_code, 0);
  struct Case {
    std::string name;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {"fsdp_1f1b", {"--microbatches", "4"}},
      {"fsdp_gpipe", {"--pp-schedule", "gpipe", "--microbatches", "4"}},
      {"fsdp_interleaved", {"--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages", "2", "--microbatches", "2"}},
      {"fsdp_zero2", {"--microbatches", "4", "--no-reshard-after-forward", "--prefetch", "2"}},
      {"fsdp_recompute", {"--microbatches", "4", "--checkpoint-activations", "--cpu-offload", "--prefetch", "0"}},
      {"replicate", {"--microbatches", "4", "--dp-replicate"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> flags = {"-b", "4", "--pp", "2"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    auto r = pp(4, c.name, flags);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    expect_same_run("single", c.name, 1e-5);
    expect_same_norms("single", c.name);
  }
  auto stat = [&](const std::string& name, const char* key) { return records(name).back().at(key).get<double>(); };
  auto dp = [&](const std::string& name, const char* op, const char* what) -> int64_t {
    const nlohmann::json moved = records(name).back().at("comm").at("dp");  // a copy: records() is a temporary
    return moved.contains(op) ? moved.at(op).at(what).get<int64_t>() : 0;
  };
  for (const char* name : {"fsdp_1f1b", "fsdp_gpipe", "fsdp_interleaved", "fsdp_zero2", "fsdp_recompute"}) {
    EXPECT_EQ(dp(name, "reduce_scatter", "calls"), stat(name, "fsdp_units")) << name;
    EXPECT_EQ(dp(name, "reduce_scatter", "bytes"), 2 * stat(name, "param_bytes")) << name;
    EXPECT_EQ(dp(name, "all_gather", "calls"), stat(name, "fsdp_all_gathers")) << name;
    EXPECT_LT(dp(name, "all_reduce", "bytes"), 64) << name << ": only the loop's token count, no gradients";
  }
  // Each micro-batch gathers every block of the stage for its forward and again for its backward
  // unless the weights are kept (--no-reshard-after-forward); --prefetch 0 prefetches nothing.
  EXPECT_LT(dp("fsdp_zero2", "all_gather", "calls"), dp("fsdp_1f1b", "all_gather", "calls"));
  EXPECT_GT(stat("fsdp_zero2", "fsdp_prefetched"), 0);
  EXPECT_EQ(stat("fsdp_recompute", "fsdp_prefetched"), 0);
  // Replicas: the stage's whole gradient in one all-reduce, nothing sharded.
  EXPECT_EQ(dp("replicate", "reduce_scatter", "calls"), 0);
  EXPECT_GE(dp("replicate", "all_reduce", "bytes"), stat("replicate", "param_bytes"));
  EXPECT_LT(stat("fsdp_1f1b", "param_bytes"), 0.6 * stat("replicate", "param_bytes"));
}

TEST_F(PpTest, AccumulationAndClippingMatchSingleDevice) {
  const std::vector<std::string> accum = {"-b", "4", "--grad-accum", "2", "--max-grad-norm", "0.5"};
  ASSERT_EQ(single("single", accum).exit_code, 0);
  auto r = pp(2, "accum_x2", {"-b", "4", "--grad-accum", "2", "--max-grad-norm", "0.5", "--microbatches", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run("single", "accum_x2", 1e-5);
  expect_same_norms("single", "accum_x2");
}

// Each rank writes its stages' slice (sharded, fsdp_index.json version 2); the checkpoint
// resumes bit-identically, loads at other layouts (pp2 -> single, single -> pp2 x dp2, where
// each dp replica writes its rows of the stage) within the parity tolerance of the run that
// never stopped, and consolidates into the weights the run ended with.
TEST_F(PpTest, ShardedCheckpointsResumeLoadAtOtherLayoutsAndConsolidate) {
  const std::vector<std::string> common = {"--strategy", "pp", "-m", "debug-pp", "-b", "4", "--microbatches", "2",
                                           "--ckpt-freq", "3"};
  ASSERT_NO_FATAL_FAILURE(expect_resume_is_bit_identical(2, common, "ck"));
  const fs::path step3 = dir_ / "out" / "ck" / "checkpoints" / "step_000000003";
  ASSERT_TRUE(fs::exists(step3 / "fsdp_index.json"));
  ASSERT_TRUE(fs::exists(step3 / "shard-00000-of-00002.safetensors"));
  ASSERT_TRUE(fs::exists(step3 / "shard-00001-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(step3 / "model.safetensors"));

  // pp2 -> single: the single-device run continues the pipeline's curve.
  expect_single_device_continues("straight", step3);

  // single -> pp2 x dp2.
  const std::vector<std::string> single_flags = {"-m", "debug-pp", "-b", "4", "--ckpt-freq", "3"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  ASSERT_EQ(train(0, "single_straight", with(single_flags, {"--max-steps", "6", "--final-weights", weights("single_straight")}))
                .exit_code,
            0);
  ASSERT_EQ(train(0, "single_first", with(single_flags, {"-e", "s1", "--max-steps", "3"})).exit_code, 0);
  auto on_pp_dp = train(4, "on_pp_dp", {"--strategy", "pp", "--pp", "2", "-m", "debug-pp", "-b", "2", "--microbatches",
                                        "2", "-e", "s1", "--max-steps", "6", "--ckpt-freq", "3", "--final-weights",
                                        weights("on_pp_dp")});
  ASSERT_EQ(on_pp_dp.exit_code, 0) << on_pp_dp.output;
  EXPECT_NE(on_pp_dp.output.find("resuming from"), std::string::npos) << on_pp_dp.output;
  expect_same_run("single_straight", "on_pp_dp", 1e-5, 3);

  // Its step-6 checkpoint: 4 shards (2 stages x 2 replicas' rows); consolidated and loaded
  // with lr 0, the weights the run ended with, bit for bit.
  const fs::path step6 = dir_ / "out" / "s1" / "checkpoints" / "step_000000006";
  ASSERT_TRUE(fs::exists(step6 / "shard-00003-of-00004.safetensors"));
  const std::string hf = (dir_ / "consolidated").string();
  auto cons = run({DDX_BIN, "checkpoint", "consolidate", step6.string(), "-o", hf});
  ASSERT_EQ(cons.exit_code, 0) << cons.output;
  EXPECT_NE(cons.output.find("from 4 shards"), std::string::npos) << cons.output;
  auto reload = train(0, "reload", {"-m", "debug-pp", "-b", "4", "--init-from", hf, "--lr", "0", "--max-steps", "1",
                                    "--final-weights", weights("reload")});
  ASSERT_EQ(reload.exit_code, 0) << reload.output;
  EXPECT_EQ(file_checksum(weights("reload")), file_checksum(weights("on_pp_dp")));
}

// pp 2 x FSDP 2: every rank writes its FSDP rows of its stage; the checkpoint resumes
// bit-identically and loads on one rank within the parity tolerance of the run that never stopped.
TEST_F(PpTest, FsdpCheckpointsResumeAndLoadOnOneRank) {
  const std::vector<std::string> common = {"--strategy", "pp", "--pp", "2", "-m", "debug-pp", "-b", "2",
                                           "--microbatches", "2", "--ckpt-freq", "3"};
  ASSERT_NO_FATAL_FAILURE(expect_resume_is_bit_identical(4, common, "ck"));
  const fs::path step3 = dir_ / "out" / "ck" / "checkpoints" / "step_000000003";
  ASSERT_TRUE(fs::exists(step3 / "fsdp_index.json"));
  ASSERT_TRUE(fs::exists(step3 / "shard-00003-of-00004.safetensors"));
  expect_single_device_continues("straight", step3);
}

// 3D: each stage's blocks split by TP over 2 consecutive ranks (debug-tp: 4 heads, vocabulary
// 1001 split 501 + 500, 2 blocks, so one block per stage), at 4 ranks pp 2 x tp 2 and at 8
// ranks pp 2 x FSDP 2 x tp 2, against the single-device run; the TP regions' all-reduces on
// the tp dimension; the checkpoint resumed bit-identically and loaded on one rank.
TEST_F(PpTest, TensorParallelStagesMatchSingleDevice) {
  auto run_on = [&](int ranks, const std::string& name, std::vector<std::string> flags) {
    std::vector<std::string> all = {"-m", "debug-tp", "--max-steps", "8", "--final-weights", weights(name)};
    all.insert(all.end(), flags.begin(), flags.end());
    return train(ranks, name, all);
  };
  ASSERT_EQ(run_on(0, "single", {"-b", "8"}).exit_code, 0);
  const std::vector<std::string> pp_tp = {"--strategy", "pp", "--pp", "2", "--tp", "2", "--microbatches", "2"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::pair<int, std::pair<std::string, std::vector<std::string>>>> runs = {
      {4, {"tp_1f1b", with(pp_tp, {"-b", "8"})}},
      {4, {"tp_gpipe", with(pp_tp, {"-b", "8", "--pp-schedule", "gpipe"})}},
      {8, {"tp_fsdp", with(pp_tp, {"-b", "4"})}},
  };
  for (const auto& [ranks, run] : runs) {
    auto r = run_on(ranks, run.first, run.second);
    ASSERT_EQ(r.exit_code, 0) << run.first << "\n" << r.output;
    expect_same_run("single", run.first, 1e-5);
    expect_same_norms("single", run.first);
  }
  // Stage 0 (the embedding and block 0): the vocab-parallel embedding's all-reduce and the
  // block's two per micro-batch in forward, two more in backward.
  const nlohmann::json tp = records("tp_1f1b").back().at("comm").at("tp");
  EXPECT_EQ(tp.at("all_reduce").at("calls").get<int64_t>(), 2 * (1 + 2 + 2)) << tp.dump();
  EXPECT_TRUE(records("tp_fsdp").back().at("comm").at("dp").contains("reduce_scatter"));

  const std::vector<std::string> common = with(pp_tp, {"-m", "debug-tp", "-b", "4", "--ckpt-freq", "3"});
  ASSERT_NO_FATAL_FAILURE(expect_resume_is_bit_identical(4, common, "ck"));
  expect_single_device_continues("straight", dir_ / "out" / "ck" / "checkpoints" / "step_000000003", "debug-tp");
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

// A stage that stops, under `ddx launch` with a 3 s collective timeout: `ddx analyze` on the
// flight recorder dumps names the rank and its pipeline stage. A hang at the start of step 2 on
// rank 2 of 4 leaves the others in the step's barrier on the pipeline group; rank 1's sends
// held back (slow-link) leave rank 0 in the receive of stage 1's gradient.
TEST_F(PpTest, AnalyzerNamesTheStageThatStopped) {
  const std::vector<std::string> flags = {"--strategy", "pp", "-m", "debug-pp", "-b", "4", "--microbatches", "2",
                                          "--max-steps", "3", "--collective-timeout", "3"};
  auto stopped = [&](int ranks, const std::string& name, const std::string& fault) {
    std::vector<std::string> f = flags;
    const std::string traces = (dir_ / (name + "-traces")).string();
    f.insert(f.end(), {"--trace-dir", traces, "--fault", fault});
    auto r = train(ranks, name, f);
    EXPECT_NE(r.exit_code, 0) << r.output;
    return run({DDX_BIN, "analyze", traces}).output;
  };
  const std::string hang = stopped(4, "hang", "hang@rank=2,step=2");
  EXPECT_NE(hang.find("rank 2 never joined "), std::string::npos) << hang;
  EXPECT_NE(hang.find("; rank 2 is pipeline stage 2"), std::string::npos) << hang;

  const std::string stall = stopped(2, "stall", "slow-link@rank=1,op=send,ms=30000");
  EXPECT_NE(stall.find("rank 1 (pipeline stage 1) stopped: rank 0 (pipeline stage 0) waits in recv"),
            std::string::npos)
      << stall;
  EXPECT_NE(stall.find("for micro-batch 0's gradient from stage 1"), std::string::npos) << stall;
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
  // FSDP's tuning flags need FSDP on the dp dimension: refused with replicas, and without dp ranks.
  one_line(train(0, "replicate", {"--strategy", "pp", "--dp-replicate", "--prefetch", "2"}),
           "--prefetch tunes FSDP, but --strategy pp --dp-replicate replicates each stage over the data-parallel ranks");
  auto no_dp = train(2, "no_dp", {"--strategy", "pp", "-m", "debug-pp", "--checkpoint-activations", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(no_dp)) << no_dp.output;
  EXPECT_NE(no_dp.output.find("--checkpoint-activations tunes FSDP on the data-parallel ranks, but --pp 2 on 2 ranks "
                              "leaves none"),
            std::string::npos)
      << no_dp.output;
  // 3D layouts.
  auto tp_odd = train(4, "tp_odd", {"--strategy", "pp", "--pp", "2", "--tp", "3", "-m", "debug-tp", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(tp_odd)) << tp_odd.output;
  EXPECT_NE(tp_odd.output.find("--pp 2 x --tp 3 = 6 does not divide the world size 4"), std::string::npos) << tp_odd.output;
  auto heads = train(4, "heads", {"--strategy", "pp", "--pp", "2", "--tp", "2", "-m", "debug-pp", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(heads)) << heads.output;
  EXPECT_NE(heads.output.find("--tp 2 does not divide the 5 query heads of model debug-pp"), std::string::npos)
      << heads.output;
  one_line(train(0, "sp", {"--strategy", "pp", "--sequence-parallel"}),
           "--sequence-parallel applies to --strategy tp or 2d, not pp");
  auto dp_odd = train(4, "dp_odd", {"--strategy", "pp", "--pp", "3", "-m", "debug-pp", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(dp_odd)) << dp_odd.output;
  EXPECT_NE(dp_odd.output.find("--pp 3 does not divide the world size 4"), std::string::npos) << dp_odd.output;
  auto split = train(2, "split", {"--strategy", "pp", "-m", "debug-pp", "--pp-split", "9", "--max-steps", "1"});
  EXPECT_TRUE(usage_failure(split)) << split.output;
  EXPECT_NE(split.output.find("--pp-split 9: every cut must be a block index above the previous one and below 8"),
            std::string::npos)
      << split.output;
}

}  // namespace
}  // namespace ddx::testing
