// `ddx train --strategy fsdp` against PyTorch's own FSDP2 (tests/python/fsdp2_reference.py:
// torch.distributed.fsdp.fully_shard on every block, then the root; Gloo, CPU, 2 ranks), run
// with the Python of the same torch wheel (DDX_PYTHON).
//
// Both sides train the debug GPT-2 for 20 steps from the same weights, on the same tokens, with
// the same loss normalisation (sum of token losses / global token count, gradients summed),
// AdamW and schedule. The weights: ddx writes its initialisation for --seed 7 with one step at
// --lr 0 (AdamW then changes nothing) and FSDP builds the same weights from the same seed
// (layout-independent init); the reference loads that file. The batches: the dataset is a text
// file of exactly one global batch of blocks (8 x 32 + 1 bytes, byte tokenizer), so every step
// trains on all blocks and neither side's result depends on which rank reads which block; the
// sampler's shuffle only changes summation order.
//
// Checks: every step's loss within 1e-5 relative, the global gradient norm within 1e-4
// relative, final weights within 1e-4 of the largest weight (train_test's measure), and no
// process of either run left behind.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "models/safetensors.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

constexpr int kRanks = 2;
constexpr int kBatchPerRank = 4;
constexpr int kSeqLength = 32;
constexpr int kSteps = 20;
constexpr double kLossRtol = 1e-5;
constexpr double kGradNormRtol = 1e-4;
constexpr double kWeightTolOfScale = 1e-4;
constexpr int kRunTimeoutS = 150;

// Exactly kRanks x kBatchPerRank blocks of kSeqLength + 1 tokens under the byte tokenizer:
// num_blocks = (tokens - 1) / T. ASCII words from a fixed LCG; ends with the newline ddx would
// otherwise append.
std::string one_global_batch_of_text() {
  static const char* words[] = {"the", "mason", "of", "Corul", "built", "a", "bridge", "over", "river",
                                "and", "mill", "turned", "all", "day", "long", "while", "17", "+", "25", "=", "42."};
  const size_t bytes = static_cast<size_t>(kRanks * kBatchPerRank * kSeqLength);
  std::string text;
  uint32_t x = 12345;
  while (text.size() < bytes) {
    x = x * 1103515245u + 12345u;
    text += words[(x >> 16) % (sizeof(words) / sizeof(words[0]))];
    text += ' ';
  }
  text.resize(bytes);
  return text + "\n";
}

class FsdpReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("fsdp-reference", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    data_ = dir_ + "/data.txt";
    std::ofstream(data_, std::ios::binary) << one_global_batch_of_text();
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ec);
  }

  // Runs argv to completion (hard timeout), then requires that nothing it started is left.
  RunResult run(const std::string& name, std::vector<std::string> argv) {
    RunResult r;
    pid_t group = -1;
    {
      ChildProcess child(std::move(argv), {{"OMP_NUM_THREADS", "1"}}, dir_ + "/" + name + ".log");
      group = child.pid();
      auto status = child.wait(std::chrono::seconds(kRunTimeoutS));
      r.output = child.output();
      if (!status) {
        r.output += "\n[test] TIMED OUT after " + std::to_string(kRunTimeoutS) + " s";
      } else if (WIFEXITED(*status)) {
        r.exit_code = WEXITSTATUS(*status);
      }
    }  // a timed-out child's process group is killed here
    std::vector<pid_t> left = processes_left(dir_, group);
    EXPECT_TRUE(wait_until_dead(left, std::chrono::seconds(10))) << name << ": processes left behind";
    for (pid_t pid : processes_left(dir_, group)) ::kill(pid, SIGKILL);
    return r;
  }

  std::vector<std::string> ddx_train(const std::string& name, std::vector<std::string> extra) const {
    std::vector<std::string> argv = {DDX_BIN, "train", "-m", "debug", "-d", data_, "-s", std::to_string(kSeqLength),
                                     "--seed", "7", "--save-dir", dir_ + "/out", "--metrics-file", path(name + ".jsonl"),
                                     "--log-freq", "1", "--no-progress"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // ddx's initial weights (one step at --lr 0) and the PyTorch FSDP2 reference run from them.
  void run_reference() {
    auto init = run("init", ddx_train("init", {"-b", std::to_string(kRanks * kBatchPerRank), "--lr", "0",
                                               "--max-steps", "1", "--final-weights", path("init.safetensors")}));
    ASSERT_EQ(init.exit_code, 0) << init.output;
    auto ref = run("reference", {DDX_PYTHON, std::string(DDX_SOURCE_DIR) + "/tests/python/fsdp2_reference.py",
                                 "--data", data_, "--init", path("init.safetensors"), "--model", "debug",
                                 "--seq-length", std::to_string(kSeqLength), "--batch-size",
                                 std::to_string(kBatchPerRank), "--steps", std::to_string(kSteps), "--lr", "3e-3",
                                 "--nproc", std::to_string(kRanks), "--out", path("reference.json"),
                                 "--final-weights", path("reference.safetensors")});
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    std::ifstream in(path("reference.json"));
    reference_ = nlohmann::json::parse(in);
  }

  RunResult run_ddx(const std::string& name, std::vector<std::string> flags) {
    std::vector<std::string> argv = {DDX_BIN, "launch", "--nproc-per-node", std::to_string(kRanks), "--"};
    std::vector<std::string> extra = {"--strategy", "fsdp", "-b", std::to_string(kBatchPerRank),
                                      "--lr", "3e-3", "--max-steps", std::to_string(kSteps), "--final-weights",
                                      path(name + ".safetensors")};
    extra.insert(extra.end(), flags.begin(), flags.end());
    auto train = ddx_train(name, extra);
    argv.insert(argv.end(), train.begin(), train.end());
    return run(name, argv);
  }

  void expect_matches_reference(const std::string& name) {
    std::vector<nlohmann::json> records;
    std::ifstream in(path(name + ".jsonl"));
    for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
    const auto& losses = reference_.at("losses");
    const auto& norms = reference_.at("grad_norms");
    ASSERT_EQ(records.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
    double worst = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      const double ours = records[i].at("loss").get<double>(), ref = losses[i].get<double>();
      const double rel = std::fabs(ours - ref) / std::fabs(ref);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, kLossRtol) << name << " step " << i + 1 << ": ddx " << ours << " vs PyTorch FSDP2 " << ref;
      const double g = records[i].at("grad_norm").get<double>(), g_ref = norms[i].get<double>();
      EXPECT_LE(std::fabs(g - g_ref) / g_ref, kGradNormRtol)
          << name << " step " << i + 1 << ": grad norm ddx " << g << " vs PyTorch FSDP2 " << g_ref;
    }
    // Training moved: a comparison of two runs that both did nothing would pass trivially.
    EXPECT_LT(losses.back().get<double>(), 0.8 * losses.front().get<double>());
    std::printf("%s: %d steps, worst relative loss difference to PyTorch FSDP2 %.3g\n", name.c_str(), kSteps, worst);

    auto ours = models::read_safetensors_index(path(name + ".safetensors"));
    auto ref = models::read_safetensors_index(path("reference.safetensors"));
    ASSERT_EQ(ours.size(), ref.size());
    double max_diff = 0, scale = 0;
    std::string worst_tensor;
    for (const auto& [tensor, info] : ref) {
      ASSERT_TRUE(ours.count(tensor)) << tensor << " missing from ddx's final weights";
      auto x = models::read_tensor(ours.at(tensor)), y = models::read_tensor(info);
      ASSERT_EQ(x.sizes(), y.sizes()) << tensor;
      const double diff = (x - y).abs().max().item<double>();
      if (diff > max_diff) {
        max_diff = diff;
        worst_tensor = tensor;
      }
      scale = std::max(scale, y.abs().max().item<double>());
    }
    EXPECT_LE(max_diff, kWeightTolOfScale * scale)
        << name << ": worst tensor " << worst_tensor << ": " << max_diff << " of max weight " << scale;
  }

  std::string path(const std::string& file) const { return dir_ + "/" + file; }

  std::string dir_, data_;
  nlohmann::json reference_;
};

TEST_F(FsdpReferenceTest, MatchesPyTorchFsdp2AtTwoRanks) {
  ASSERT_NO_FATAL_FAILURE(run_reference());
  auto r = run_ddx("ddx", {});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_matches_reference("ddx");
}

// Options that change when parameters are gathered and what is kept, never the arithmetic.
TEST_F(FsdpReferenceTest, ScheduleOptionsMatchPyTorchFsdp2) {
  ASSERT_NO_FATAL_FAILURE(run_reference());
  auto r = run_ddx("ddx_options", {"--no-reshard-after-forward", "--prefetch", "2", "--checkpoint-activations"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_matches_reference("ddx_options");
}

}  // namespace
}  // namespace ddx::testing
