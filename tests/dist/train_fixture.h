#pragma once
// The fixture of the `ddx train` end-to-end tests (train_test, fsdp_test): a scratch folder
// per test, `ddx train` under `ddx launch` with the common test settings, and the comparison
// of two runs' loss curves and final weights.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddx/checksum.h"
#include "models/safetensors.h"
#include "process_helpers.h"

namespace ddx::testing {

namespace fs = std::filesystem;

// Tolerances of a float64 "matches single device" comparison (--dtype fp64 on both sides).
// Rounding moves float64 runs by ~1e-16 per step; at an ill-conditioned step (a gradient spike)
// it was measured at 6e-14 relative on the gradient norm (TpTest's Llama at step 8: fp32 showed
// 2.9e-4 there). 1e-10 is over 1000x that, and still 10,000x below what a real bug moves (one
// gradient element off by 1e-4, a learning rate off by 0.1 %).
constexpr double kFloat64Rel = 1e-10;        // loss and gradient norm, relative, every step
constexpr double kFloat64WeightTol = 1e-9;   // final weights, of the largest weight (AdamW's
                                             // normalised update turns rounding into ~lr-sized
                                             // moves of near-zero-gradient weights: 1e-12 measured)

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(DDX_BINARY_DIR) / "test-scratch" / (std::string("train-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  RunResult run(std::vector<std::string> argv, int timeout_s = 240) {
    ChildProcess child(std::move(argv), {}, (dir_ / ("output-" + std::to_string(runs_++) + ".txt")).string());
    auto status = child.wait(std::chrono::seconds(timeout_s));
    RunResult r;
    r.output = child.output();
    if (status && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
    if (!status) r.output += "\n[test] timed out";
    return r;
  }

  // `ddx train` (under `ddx launch -np ranks` when ranks > 0) with the common test settings.
  RunResult train(int ranks, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv;
    if (ranks > 0) argv = {DDX_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--"};
    std::vector<std::string> base = {DDX_BIN, "train", "--save-dir", (dir_ / "out").string(),
                                     "--metrics-file", metrics(name), "--log-freq", "1", "--no-progress",
                                     "--seed", "7"};
    // Defaults the caller may override.
    auto given = [&](const char* flag) { return std::find(extra.begin(), extra.end(), flag) != extra.end(); };
    if (!given("-m")) base.insert(base.end(), {"-m", "debug"});
    if (!given("--lr")) base.insert(base.end(), {"--lr", "3e-3"});
    if (!given("-s")) base.insert(base.end(), {"-s", "32"});
    argv.insert(argv.end(), base.begin(), base.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  }

  std::string metrics(const std::string& name) const { return (dir_ / (name + ".jsonl")).string(); }
  std::string weights(const std::string& name) const { return (dir_ / (name + ".safetensors")).string(); }

  std::vector<nlohmann::json> records(const std::string& name) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(metrics(name));
    std::string line;
    while (std::getline(in, line)) {
      // A line being written while we read is skipped (the trainer writes whole lines at once).
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) out.push_back(j);
    }
    return out;
  }

  std::vector<double> losses(const std::string& name) const {
    std::vector<double> out;
    for (const auto& r : records(name)) out.push_back(r.at("loss").get<double>());
    return out;
  }

  // Per-step relative loss difference stays within `tol`; final weights agree to 1e-4 of the
  // model's largest weight, the parity suite's measure. `b` may be a resumed run whose records
  // begin after step `b_from` (its continuation only): it is then compared with `a`'s last steps. (Per element or per tensor is the wrong
  // scale: GPT-2's key biases have an exactly zero true gradient — softmax ignores a constant
  // added to every key — so Adam turns last-bit gradient noise there into updates of ~lr/100
  // per step in both runs, differently.)
  // Losses within `tol` (relative) at every step, final weights within `weight_tol` of the
  // largest weight. For float64 runs pass kFloat64SameRun's numbers.
  // `grad_norm_tol` >= 0 compares every step's gradient norm too (relative): AdamW normalises a
  // gradient scaled by a constant away, so a shard counted twice or a replicated gradient summed
  // N times leaves the loss alone and shows only in the norm.
  void expect_same_run(const std::string& a, const std::string& b, double tol, size_t b_from = 0,
                       double weight_tol = 1e-4, double grad_norm_tol = -1) {
    auto la = losses(a), lb = losses(b);
    ASSERT_EQ(la.size(), b_from + lb.size());
    ASSERT_FALSE(lb.empty());
    ASSERT_EQ(records(b).front().at("step").get<size_t>(), b_from + 1);
    for (size_t i = 0; i < lb.size(); ++i) {
      const double x = la[b_from + i], y = lb[i];
      EXPECT_LE(std::fabs(x - y) / std::fabs(x), tol) << "step " << b_from + i + 1 << ": " << x << " vs " << y;
    }
    if (grad_norm_tol >= 0) {
      const auto ra = records(a), rb = records(b);
      for (size_t i = 0; i < rb.size(); ++i) {
        const double x = ra[b_from + i].at("grad_norm").get<double>(), y = rb[i].at("grad_norm").get<double>();
        EXPECT_LE(std::fabs(x - y) / x, grad_norm_tol) << "step " << b_from + i + 1 << ": grad norm " << x << " vs " << y;
      }
    }
    auto wa = models::read_safetensors_index(weights(a)), wb = models::read_safetensors_index(weights(b));
    ASSERT_EQ(wa.size(), wb.size());
    double max_diff = 0, scale = 0;
    std::string worst;
    for (const auto& [name, info] : wa) {
      auto x = models::read_tensor(info), y = models::read_tensor(wb.at(name));
      const double diff = (x - y).abs().max().item<double>();
      if (diff > max_diff) {
        max_diff = diff;
        worst = name;
      }
      scale = std::max(scale, y.abs().max().item<double>());
    }
    EXPECT_LE(max_diff, weight_tol * scale) << "worst tensor " << worst << ": " << max_diff << " of max weight " << scale;
  }

  // `flags` (which set --ckpt-freq 3) on `ranks` ranks straight through 6 steps, and stopped at
  // step 3 then resumed from its checkpoint in experiment `experiment`: the same losses and
  // bit-identical final weights.
  void expect_resume_is_bit_identical(int ranks, const std::vector<std::string>& flags, const std::string& experiment) {
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> out = flags;
      out.insert(out.end(), extra.begin(), extra.end());
      return out;
    };
    ASSERT_EQ(train(ranks, "straight", with({"--max-steps", "6", "--final-weights", weights("straight")})).exit_code, 0);
    ASSERT_EQ(train(ranks, "first", with({"-e", experiment, "--max-steps", "3"})).exit_code, 0);
    auto resumed = train(ranks, "resumed", with({"-e", experiment, "--max-steps", "6", "--final-weights", weights("resumed")}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
    auto s = losses("straight"), r = losses("resumed");
    ASSERT_EQ(r.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(s[3 + i], r[i]) << "step " << 4 + i;
    EXPECT_EQ(file_checksum(weights("straight")), file_checksum(weights("resumed")));
  }

  fs::path dir_;
  int runs_ = 0;
};

}  // namespace ddx::testing
