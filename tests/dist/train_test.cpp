// `ddx train` end to end with real processes: the single-device baseline (metrics, plot,
// resume bit-identity, refused checkpoints, bad input) and DDP against it at 2 and 4 ranks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ddx/checksum.h"
#include "models/safetensors.h"
#include "process_helpers.h"
#include "train_fixture.h"

namespace ddx::testing {
namespace {

bool has_line(const std::string& output, const std::string& line) {
  return ("\n" + output).find("\n" + line + "\n") != std::string::npos;
}

TEST_F(TrainTest, DefaultsTrainAndWriteMetricsAndPlot) {
  auto r = train(0, "default", {"--max-steps", "30"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto recs = records("default");
  ASSERT_EQ(recs.size(), 30u);
  for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "data_ms", "forward_ms", "backward_ms",
                          "update_ms", "comm_wait_ms", "rss_bytes", "peak_rss_bytes"}) {
    EXPECT_TRUE(recs[0].contains(key)) << key;
  }
  EXPECT_LT(recs.back().at("loss").get<double>(), recs.front().at("loss").get<double>() * 0.9) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "default.svg"));  // beside the named metrics file, under its name
  EXPECT_TRUE(recs.back().contains("param_checksum"));
}

// `ddx train` with no flags, as the docs show it first: a demo of kDemoSteps (300) steps with
// the learning rate decaying over them, a metrics line every 10 steps, and no empty traces/.
TEST_F(TrainTest, NoFlagsIsAShortDemo) {
  auto r = run({"/bin/sh", "-c", "cd '" + dir_.string() + "' && exec '" + DDX_BIN + "' train"}, 540);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 300 steps ("), std::string::npos) << r.output;
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(dir_ / "outputs" / "runs")) runs.push_back(e.path());
  ASSERT_EQ(runs.size(), 1u);
  std::vector<nlohmann::json> recs;
  std::ifstream in(runs[0] / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) recs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(recs.size(), 30u);
  EXPECT_EQ(recs.back()["step"], 300);
  EXPECT_NEAR(recs.back()["lr"].get<double>(), 3e-5 * 0.01, 3e-5 * 1e-4);  // the cosine ends with the run
  EXPECT_GT(recs[14]["lr"].get<double>(), 3e-5 * 0.4);
  EXPECT_TRUE(fs::exists(runs[0] / "loss.svg"));
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_NE(e.path().filename(), "traces") << "a run that never dumped left " << e.path();
  }
}

// Too little data stops the run before anything is written: no token cache beside the data,
// no cache folder, no metrics; with --cache-dir the cache goes there instead of beside the data.
TEST_F(TrainTest, TooLittleDataWritesNothingAndCachesCanLiveElsewhere) {
  fs::create_directories(dir_ / "data");
  const std::string small = (dir_ / "data" / "small.txt").string();
  std::ofstream(small) << std::string(100, 'x');
  for (bool with_cache_dir : {false, true}) {
    std::vector<std::string> flags = {"-d", small, "-b", "8", "--max-steps", "1"};
    if (with_cache_dir) flags.insert(flags.end(), {"--cache-dir", (dir_ / "caches").string()});
    auto r = train(0, "small", flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(has_line(r.output, "ddx: error: dataset " + small + " has 101 tokens (byte), 3 blocks of seq_length + 1 "
                                   "= 33, fewer than one global batch of 8 (-b x ranks x --grad-accum)"))
        << r.output;
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "data"), fs::directory_iterator()), 1) << "only small.txt";
    EXPECT_FALSE(fs::exists(dir_ / "caches"));
    EXPECT_FALSE(fs::exists(dir_ / "out"));
    EXPECT_FALSE(fs::exists(metrics("small")));
  }
  std::ofstream(small) << std::string(2000, 'x');
  auto r = train(0, "enough", {"-d", small, "--max-steps", "1", "--cache-dir", (dir_ / "caches").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "data"), fs::directory_iterator()), 1) << "only small.txt";
  std::vector<std::string> cached;
  for (const auto& e : fs::directory_iterator(dir_ / "caches")) cached.push_back(e.path().filename().string());
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_NE(cached[0].find(".ddxtok"), std::string::npos) << cached[0];
}

TEST_F(TrainTest, ResumeContinuesBitIdentically) {
  ASSERT_EQ(train(0, "straight", {"-e", "straight", "--max-steps", "20", "--final-weights", weights("straight")}).exit_code, 0);
  auto first = train(0, "resumed", {"-e", "resumed", "--max-steps", "10", "--ckpt-freq", "10"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = train(0, "resumed", {"-e", "resumed", "--max-steps", "20", "--final-weights", weights("resumed")});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resuming from"), std::string::npos) << second.output;
  auto a = losses("straight"), b = losses("resumed");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_EQ(file_checksum(weights("straight")), file_checksum(weights("resumed")));
}

// --fused-adamw runs torch's fused kernel: within the parity tolerance of the exact default but
// not bit-identical to it (so the flag really changes the kernel), and deterministic, so a
// resumed run still matches the uninterrupted one bit for bit.
TEST_F(TrainTest, FusedAdamWIsCloseToTheExactDefaultAndResumes) {
  ASSERT_EQ(train(0, "exact", {"--max-steps", "20", "--final-weights", weights("exact")}).exit_code, 0);
  auto fused = train(0, "fused", {"--fused-adamw", "--max-steps", "20", "--final-weights", weights("fused")});
  ASSERT_EQ(fused.exit_code, 0) << fused.output;
  expect_same_run("exact", "fused", 1e-5);
  EXPECT_NE(file_checksum(weights("exact")), file_checksum(weights("fused")));
  expect_resume_is_bit_identical(0, {"--fused-adamw", "--ckpt-freq", "3"}, "fused-resume");
}

// A mismatched checkpoint is refused; a corrupt newest one falls back to the previous one
// (the only one corrupt is refused: FsdpTest.BadInputFailsWithOneLineAndKeepsFiles).
TEST_F(TrainTest, CorruptOrMismatchedCheckpointIsRefused) {
  ASSERT_EQ(train(0, "c", {"-e", "c", "--max-steps", "4", "--ckpt-freq", "2"}).exit_code, 0);
  // A different sequence length makes the checkpoint meaningless: refused, not loaded.
  auto mismatch = train(0, "c2", {"-e", "c", "--max-steps", "6", "-s", "16"});
  EXPECT_EQ(mismatch.exit_code, 2) << mismatch.output;
  EXPECT_TRUE(has_line(mismatch.output, "ddx: error: checkpoint " + (dir_ / "out" / "c" / "checkpoints").string() +
                                            "/step_000000004 does not match this run: seq_length was 32, now 16 "
                                            "(use another --experiment-name to start afresh)"))
      << mismatch.output;
  // Flip one byte of the newest checkpoint's weights.
  fs::path ckpt = dir_ / "out" / "c" / "checkpoints" / "step_000000004" / "model.safetensors";
  ASSERT_TRUE(fs::exists(ckpt));
  {
    std::fstream f(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  // The corrupt newest checkpoint is named and the one before it is used (docs/faults.md).
  auto corrupt = train(0, "c3", {"-e", "c", "--max-steps", "6"});
  EXPECT_EQ(corrupt.exit_code, 0) << corrupt.output;
  EXPECT_NE(corrupt.output.find("step_000000004 is corrupt: model.safetensors has checksum"), std::string::npos)
      << corrupt.output;
  EXPECT_NE(corrupt.output.find("falling back to the previous checkpoint"), std::string::npos) << corrupt.output;
  EXPECT_NE(corrupt.output.find("step_000000002 at step 2"), std::string::npos) << corrupt.output;
}

// A checkpoint found corrupt on resume, with a good one before it, is set aside (renamed
// <name>.corrupt) as the run falls back: it no longer counts toward --keep-checkpoints, so
// rotation keeps the good ones, and no later resume tries it again (issue 44, item 6). Left under
// its own name it was the newest of three here, and --keep-checkpoints 1 kept only it.
TEST_F(TrainTest, ACorruptCheckpointIsSetAsideAndLeftOutOfRotation) {
  const fs::path ckpts = dir_ / "out" / "rot" / "checkpoints";
  auto first = train(0, "rot1", {"-e", "rot", "--max-steps", "10", "--ckpt-freq", "5", "--keep-checkpoints", "2",
                                 "--fault", "ckpt-corrupt@step=10"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(fs::exists(ckpts / "step_000000005" / "trainer_state.json"));
  ASSERT_TRUE(fs::exists(ckpts / "step_000000010" / "trainer_state.json"));
  // Resumed to step 8 keeping one checkpoint: back to step 5, then step 8's checkpoint at the end.
  auto second = train(0, "rot2", {"-e", "rot", "--max-steps", "8", "--ckpt-freq", "5", "--keep-checkpoints", "1"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("step_000000010 is corrupt: "), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("; renamed to step_000000010.corrupt; falling back to the previous checkpoint"),
            std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("checkpoints/step_000000005 at step 5"), std::string::npos) << second.output;
  EXPECT_TRUE(fs::exists(ckpts / "step_000000008" / "trainer_state.json")) << "rotation deleted the good checkpoint";
  EXPECT_FALSE(fs::exists(ckpts / "step_000000005"));  // the oldest good one: rotated out
  EXPECT_FALSE(fs::exists(ckpts / "step_000000010"));
  EXPECT_TRUE(fs::exists(ckpts / "step_000000010.corrupt" / "trainer_state.json")) << "kept for inspection";
  // The next resume takes the newest good checkpoint and does not meet the corrupt one again.
  auto third = train(0, "rot3", {"-e", "rot", "--max-steps", "9"});
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("checkpoints/step_000000008 at step 8"), std::string::npos) << third.output;
  EXPECT_EQ(third.output.find("corrupt"), std::string::npos) << third.output;
}

// A named --metrics-file is a curve the user keeps: an existing one is never truncated unasked,
// and its plot goes beside it under its name, so two runs in one folder keep one plot each
// (issue 44, item 11). Refused, one line and exit 2 with nothing written, unless
// --overwrite-metrics, or -e continues an experiment that exists (cut back to the checkpoint's
// step and appended to).
TEST_F(TrainTest, AnExistingMetricsFileIsNeverReplacedUnasked) {
  auto text_of = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ASSERT_EQ(train(0, "a", {"--max-steps", "3"}).exit_code, 0);
  ASSERT_EQ(train(0, "b", {"--max-steps", "2"}).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "a.svg"));
  EXPECT_TRUE(fs::exists(dir_ / "b.svg"));
  EXPECT_FALSE(fs::exists(dir_ / "loss.svg"));
  const std::string curve = text_of(metrics("a")), plot = text_of(dir_ / "a.svg");

  auto again = train(0, "a", {"--max-steps", "1"});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_EQ(again.output, "ddx: error: --metrics-file " + metrics("a") +
                              " already exists: name another file, or pass --overwrite-metrics to replace it\n");
  EXPECT_EQ(text_of(metrics("a")), curve);
  EXPECT_EQ(text_of(dir_ / "a.svg"), plot);
  // -e naming a new experiment does not adopt another run's curve either.
  auto new_experiment = train(0, "a", {"-e", "new", "--max-steps", "1"});
  EXPECT_EQ(new_experiment.exit_code, 2) << new_experiment.output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "new"));
  // The plot a new curve would get replaces nothing either.
  std::ofstream(dir_ / "c.svg") << "<svg/>";
  auto plot_taken = train(0, "c", {"--max-steps", "1"});
  EXPECT_EQ(plot_taken.exit_code, 2) << plot_taken.output;
  EXPECT_EQ(plot_taken.output, "ddx: error: --metrics-file " + metrics("c") + ": its loss plot " +
                                   (dir_ / "c.svg").string() + " already exists: name a --plot-file or another "
                                   "--metrics-file, or pass --overwrite-metrics to replace it\n");
  EXPECT_FALSE(fs::exists(metrics("c")));
  EXPECT_EQ(text_of(dir_ / "c.svg"), "<svg/>");

  // Asked for: replaced.
  auto replaced = train(0, "a", {"--max-steps", "1", "--overwrite-metrics"});
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(records("a").size(), 1u);
  EXPECT_NE(text_of(dir_ / "a.svg"), plot);
  // A resume continues its own curve: cut back to the checkpoint's step (2, as if the run had
  // died before its last checkpoint), then appended to.
  ASSERT_EQ(train(0, "e", {"-e", "e", "--max-steps", "3", "--ckpt-freq", "2"}).exit_code, 0);
  fs::remove_all(dir_ / "out" / "e" / "checkpoints" / "step_000000003");
  auto resumed = train(0, "e", {"-e", "e", "--max-steps", "4"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("checkpoints/step_000000002 at step 2"), std::string::npos) << resumed.output;
  std::vector<int64_t> steps;
  for (const auto& r : records("e")) steps.push_back(r.at("step").get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
}

// Preemption: SIGTERM makes the run write a checkpoint at the next step boundary and stop
// cleanly; the next run resumes from it.
TEST_F(TrainTest, SigtermCheckpointsAndStops) {
  std::vector<std::string> argv = {DDX_BIN, "train", "--save-dir", (dir_ / "out").string(), "-e", "pre",
                                   "--metrics-file", metrics("pre"), "--log-freq", "1", "--no-progress",
                                   "-m", "debug", "-s", "32", "--seed", "7", "--lr", "3e-3", "--max-steps", "100000",
                                   "--ckpt-freq", "100000"};
  ChildProcess child(argv, {}, (dir_ / "preempted.txt").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (records("pre").size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(records("pre").size(), 3u) << child.output();
  ::kill(child.pid(), SIGTERM);
  auto status = child.wait(std::chrono::seconds(120));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << child.output();
  EXPECT_NE(child.output().find("on SIGTERM (checkpoint written)"), std::string::npos) << child.output();
  const int64_t stopped_at = records("pre").back().at("step").get<int64_t>();
  char name[32];
  std::snprintf(name, sizeof(name), "step_%09lld", static_cast<long long>(stopped_at));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "pre" / "checkpoints" / name / "trainer_state.json"));
  auto resumed = train(0, "pre", {"-e", "pre", "--max-steps", std::to_string(stopped_at + 2)});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step " + std::to_string(stopped_at)), std::string::npos) << resumed.output;
  EXPECT_EQ(records("pre").back().at("step").get<int64_t>(), stopped_at + 2);
}

TEST_F(TrainTest, BadInputFailsWithOneLineAndExitTwo) {
  // Not bad.jsonl: that is this test's --metrics-file, which ddx now refuses to replace.
  const std::string bad_jsonl = (dir_ / "bad-data.jsonl").string();
  std::ofstream(bad_jsonl) << "{\"text\": \"fine\"}\n{not json\n";
  const std::string tiny = (dir_ / "tiny.txt").string();
  std::ofstream(tiny) << "too short";
  const std::string config = (dir_ / "config.json").string();
  std::ofstream(config) << "{\"model_type\": \"gpt2\", \"n_embd\": 64}\n";
  struct Case {
    std::vector<std::string> flags;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"-m", "no-such-preset"}, "no-such-preset"},
      {{"-m", config}, config},
      {{"-d", (dir_ / "missing.txt").string()}, "missing.txt"},
      {{"-d", bad_jsonl}, "bad-data.jsonl:2"},
      {{"-d", tiny}, "tiny.txt"},
      {{"--strategy", "bogus"}, "bogus"},
      {{"--dtype", "fp8"}, "--dtype"},
      {{"-b", "0"}, "--batch-size"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> flags = c.flags;
    flags.insert(flags.end(), {"--max-steps", "1"});
    auto r = train(0, "bad", flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("ddx: error:"), std::string::npos) << r.output;
  }
}

// DDP reproduces the single-device run of the same global batch (8 sequences).
TEST_F(TrainTest, DdpMatchesSingleDeviceAtTwoAndFourRanks) {
  ASSERT_EQ(train(0, "single", {"-b", "8", "--max-steps", "20", "--final-weights", weights("single")}).exit_code, 0);
  auto two = train(2, "ddp2", {"--strategy", "ddp", "-b", "4", "--max-steps", "20", "--final-weights", weights("ddp2"),
                               "--bucket-cap-mb", "0.02", "--first-bucket-mb", "0.005"});
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_same_run("single", "ddp2", 1e-5);
  // Buckets really overlap backward: some all-reduces were issued before backward returned.
  auto recs = records("ddp2");
  EXPECT_GT(recs.back().at("ddp_buckets").get<double>(), 1);
  EXPECT_GT(recs.back().at("ddp_buckets_launched_in_backward").get<double>(), 0);
  auto four = train(4, "ddp4", {"--strategy", "ddp", "-b", "2", "--max-steps", "20", "--final-weights", weights("ddp4")});
  ASSERT_EQ(four.exit_code, 0) << four.output;
  expect_same_run("single", "ddp4", 1e-5);
}

// Accumulating 2 micro-batches of b equals one batch of 2b; ZeRO-1 equals plain DDP.
TEST_F(TrainTest, DdpGradAccumAndZero1) {
  ASSERT_EQ(train(0, "single", {"-b", "8", "--max-steps", "20", "--final-weights", weights("single")}).exit_code, 0);
  auto accum = train(2, "accum", {"--strategy", "ddp", "-b", "2", "--grad-accum", "2", "--max-steps", "20",
                                  "--final-weights", weights("accum")});
  ASSERT_EQ(accum.exit_code, 0) << accum.output;
  expect_same_run("single", "accum", 1e-5);
  auto plain = train(2, "plain", {"--strategy", "ddp", "-b", "4", "--max-steps", "20", "--final-weights", weights("plain")});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto zero1 = train(2, "zero1", {"--strategy", "ddp", "--zero1", "-b", "4", "--max-steps", "20",
                                  "--final-weights", weights("zero1")});
  ASSERT_EQ(zero1.exit_code, 0) << zero1.output;
  expect_same_run("plain", "zero1", 1e-6);
}

// ZeRO-1's sharded optimizer state is checkpointed: resume at the same world size continues
// bit-identically, and the ZeRO-1 checkpoint written at 2 ranks resumes under plain DDP at 4
// ranks (the same global batch of 8), continuing the uninterrupted 2-rank run within DDP's
// parity tolerance: losses of the steps after the resume and the final weights.
TEST_F(TrainTest, Zero1CheckpointsResumeAcrossWorldSizes) {
  auto straight = train(2, "z_straight", {"--strategy", "ddp", "--zero1", "-b", "4", "-e", "zs", "--max-steps", "16",
                                          "--final-weights", weights("z_straight")});
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  ASSERT_EQ(train(2, "z_resumed", {"--strategy", "ddp", "--zero1", "-b", "4", "-e", "zr", "--max-steps", "6"}).exit_code, 0);
  auto resumed = train(2, "z_resumed", {"--strategy", "ddp", "--zero1", "-b", "4", "-e", "zr", "--max-steps", "12"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  auto straight_losses = losses("z_straight");
  ASSERT_EQ(straight_losses.size(), 16u);
  EXPECT_EQ(std::vector<double>(straight_losses.begin(), straight_losses.begin() + 12), losses("z_resumed"));
  auto wider = train(4, "z_wider", {"--strategy", "ddp", "-b", "2", "-e", "zr", "--max-steps", "16",
                                    "--final-weights", weights("z_wider")});
  ASSERT_EQ(wider.exit_code, 0) << wider.output;
  EXPECT_NE(wider.output.find("resuming from"), std::string::npos) << wider.output;
  expect_same_run("z_straight", "z_wider", 1e-5, 12);
}

TEST_F(TrainTest, MismatchedModelAcrossRanksIsAnErrorNotAHang) {
  // Rank 1 is given another model: detected at start by comparing config hashes.
  std::vector<std::string> argv = {DDX_BIN, "launch", "--nproc-per-node", "2", "--", "bash", "-c",
                                   std::string(DDX_BIN) + " train --strategy ddp --max-steps 2 --no-progress --save-dir " +
                                       (dir_ / "out").string() + " -m $([ \"$RANK\" = 0 ] && echo debug || echo debug-llama)"};
  auto r = run(argv, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model configuration differs across ranks"), std::string::npos) << r.output;
}

// A finished experiment started again trains nothing and says so, instead of a "final loss 0"
// of steps that never ran (a new user met it).
TEST_F(TrainTest, AFinishedExperimentStartedAgainSaysThereIsNothingToTrain) {
  auto first = train(0, "done", {"-e", "done", "--max-steps", "3"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto again = train(0, "done", {"-e", "done", "--max-steps", "3"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("done: the checkpoint is already at step 3 of 3, nothing to train"), std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("final loss 0"), std::string::npos) << again.output;
  EXPECT_EQ(records("done").size(), 3u);  // the curve is the first run's, untouched
}

}  // namespace
}  // namespace ddx::testing
