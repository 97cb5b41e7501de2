// `ddx parity` in CI: every landed strategy against the single-device baseline at 2 and 4
// ranks, and the proof that the suite fails on deliberately broken variants, naming the
// strategy and the first bad step.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string output;
  nlohmann::json report;
};

Outcome run_parity(const std::string& tag, std::vector<std::string> flags, std::map<std::string, std::string> env) {
  const fs::path dir = fs::path(DDX_BINARY_DIR) / "test-scratch" / ("parity-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> argv{DDX_BIN, "parity", "--out", (dir / "out").string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ChildProcess child(argv, env, (dir / "output.txt").string());
  auto status = child.wait(std::chrono::seconds(840));
  Outcome o;
  o.output = child.output();
  if (status && WIFEXITED(*status)) o.exit_code = WEXITSTATUS(*status);
  std::ifstream in(dir / "out" / "report.json");
  if (in) in >> o.report;
  return o;
}

const nlohmann::json* find_run(const nlohmann::json& report, const std::string& name, int world_size) {
  for (const auto& r : report["runs"]) {
    if (r["name"] == name && r["world_size"] == world_size) return &r;
  }
  return nullptr;
}

// The suite CI runs: every landed strategy at 2 and 4 ranks with uneven token counts per rank,
// plus run-to-run determinism. Its table is copied into the CI log by ci/test.sh.
TEST(Parity, EveryStrategyMatchesSingleDevice) {
  Outcome o = run_parity("ci", {"--world-sizes", "2,4", "--uneven-tokens"}, {});
  EXPECT_EQ(o.exit_code, 0) << o.output;
  ASSERT_TRUE(o.report.contains("runs")) << o.output;
  EXPECT_TRUE(o.report["passed"].get<bool>());
  for (const char* name : {"ddp", "ddp-accum2", "ddp-zero1", "ddp-bucket-view", "ddp-fused-adamw", "fsdp", "fsdp-zero2", "fsdp-accum2",
                           "fsdp-recompute", "tp", "tp-sp", "tp-accum2",
                           "pp-gpipe", "pp-1f1b", "pp-interleaved", "pp-dp"}) {
    for (int n : {2, 4}) {
      const auto* r = find_run(o.report, name, n);
      ASSERT_NE(r, nullptr) << name << " x" << n;
      EXPECT_EQ((*r)["verdict"], "PASS") << r->dump();
      EXPECT_LE((*r)["max_rel_loss_diff"].get<double>(), 1e-5);
      EXPECT_EQ((*r)["steps"].get<int>(), 20);
    }
  }
  // 2D, pp x FSDP and pp x TP need two ranks on each mesh dimension: 4 ranks as 2 x 2, no run at 2.
  for (const char* name : {"2d", "2d-sp", "2d-replicate", "pp-fsdp", "pp-tp"}) {
    const auto* r = find_run(o.report, name, 4);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ((*r)["verdict"], "PASS") << r->dump();
    EXPECT_LE((*r)["max_rel_loss_diff"].get<double>(), 1e-5);
    EXPECT_EQ(find_run(o.report, name, 2), nullptr) << name;
  }
  const auto* det = find_run(o.report, "determinism", 1);
  ASSERT_NE(det, nullptr);
  EXPECT_EQ((*det)["verdict"], "PASS");
  const fs::path out = fs::path(DDX_BINARY_DIR) / "test-scratch" / "parity-ci" / "out";
  EXPECT_TRUE(fs::exists(out / "junit.xml"));
  EXPECT_TRUE(fs::exists(out / "loss.svg"));
  std::ofstream(fs::path(DDX_BINARY_DIR) / "parity-ci-output.txt") << o.output;
}

// A recorded baseline catches a change that moves every strategy together: the same
// configuration passes against its golden file, a golden curve moved by 1e-4 fails naming the
// golden row and its first step, and a golden file from another configuration is refused.
TEST(Parity, GoldenFileCatchesAMovedBaseline) {
  const fs::path dir = fs::path(DDX_BINARY_DIR) / "test-scratch" / "parity-golden-file";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string golden = (dir / "golden.json").string();
  const std::vector<std::string> quick = {"--strategies", "fsdp", "--world-sizes", "2", "--steps", "6", "--no-determinism"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> out = quick;
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  };
  Outcome saved = run_parity("golden-save", with({"--save-golden", golden}), {});
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  nlohmann::json g;
  std::ifstream(golden) >> g;
  ASSERT_EQ(g["steps"].size(), 6u);
  for (const char* key : {"ddx", "libtorch", "backend", "dtype", "model", "seed"}) {
    EXPECT_TRUE(g["environment"].contains(key)) << key << " missing from the golden environment";
  }

  Outcome same = run_parity("golden-same", with({"--golden", golden}), {});
  EXPECT_EQ(same.exit_code, 0) << same.output;
  const auto* row = find_run(same.report, "golden", 1);
  ASSERT_NE(row, nullptr) << same.output;
  EXPECT_EQ((*row)["verdict"], "PASS");

  g["steps"][3]["loss"] = g["steps"][3]["loss"].get<double>() * (1 + 1e-4);
  std::ofstream(dir / "moved.json") << g.dump();
  Outcome moved = run_parity("golden-moved", with({"--golden", (dir / "moved.json").string()}), {});
  EXPECT_EQ(moved.exit_code, 1) << moved.output;
  row = find_run(moved.report, "golden", 1);
  ASSERT_NE(row, nullptr) << moved.output;
  EXPECT_EQ((*row)["verdict"], "FAIL");
  EXPECT_EQ((*row)["first_bad_step"], 4);

  Outcome other = run_parity("golden-other", {"--strategies", "fsdp", "--world-sizes", "2", "--steps", "6",
                                              "--no-determinism", "--seed", "3", "--golden", golden}, {});
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("was recorded with seed="), std::string::npos) << other.output;
}

// A golden file from another configuration is refused before the baseline runs: one line, no
// output folder, in the time it takes to read the file.
TEST(Parity, GoldenOfAnotherConfigurationIsRefusedBeforeAnyRun) {
  const fs::path dir = fs::path(DDX_BINARY_DIR) / "test-scratch" / "parity-golden-first-input";  // run_parity clears its own
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string golden = (dir / "golden.json").string();
  std::ofstream(golden) << nlohmann::json({{"format", "ddx-parity-golden"},
                                           {"environment", {{"model", "debug"}, {"seed", 1}, {"dtype", "fp32"},
                                                            {"steps", 20}, {"global_batch", 8}, {"seq_length", 32},
                                                            {"lr", 0.003}}},
                                           {"steps", nlohmann::json::array()}})
                               .dump();
  Outcome o = run_parity("golden-first", {"--golden", golden}, {});
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_EQ(o.output, "ddx: error: --golden " + golden + " was recorded with seed=1, this run has 1234\n");
  EXPECT_FALSE(fs::exists(fs::path(DDX_BINARY_DIR) / "test-scratch" / "parity-golden-first" / "out"));
}

struct Broken {
  std::string tag;
  std::string breaks;
  std::string variant;   // the variant the break is in, which the report must name
  std::string strategy;  // its --strategy, when not the variant's name
  const std::string& expected_strategy() const { return strategy.empty() ? variant : strategy; }
};

void PrintTo(const Broken& b, std::ostream* os) { *os << b.breaks; }

class ParitySelfTest : public ::testing::TestWithParam<Broken> {};

// Each deliberately broken variant must be reported as a failure of its strategy, with its
// first bad step.
TEST_P(ParitySelfTest, BrokenVariantIsCaught) {
  const Broken& b = GetParam();
  Outcome o = run_parity("self-" + b.tag, {"--strategies", b.variant, "--world-sizes", "2", "--steps", "6",
                                           "--no-determinism", "--uneven-tokens"},
                         {{"DDX_FAULT", b.breaks}});
  EXPECT_EQ(o.exit_code, 1) << o.output;
  const auto* r = find_run(o.report, b.variant, 2);
  ASSERT_NE(r, nullptr) << o.output;
  EXPECT_EQ((*r)["verdict"], "FAIL") << r->dump();
  EXPECT_EQ((*r)["strategy"], b.expected_strategy());
  ASSERT_FALSE((*r)["first_bad_step"].is_null()) << r->dump();
  EXPECT_GE((*r)["first_bad_step"].get<int>(), 1);
  EXPECT_NE(o.output.find("FAIL"), std::string::npos) << o.output;
  // The planted bug is in the report, so it can never pass as a clean result.
  EXPECT_EQ(o.report["injected_faults"], nlohmann::json::array({"DDX_FAULT " + b.breaks})) << o.report.dump();
}

INSTANTIATE_TEST_SUITE_P(Breaks, ParitySelfTest,
                         ::testing::Values(Broken{"local_mean", "local-mean", "ddp"},
                                           Broken{"scaled_rank", "scale-grad@rank=1,factor=1.001", "ddp"},
                                           Broken{"skipped_bucket", "skip-bucket@bucket=0", "ddp"},
                                           Broken{"fsdp_local_mean", "local-mean", "fsdp"},
                                           Broken{"fsdp_scaled_rank", "scale-grad@rank=1,factor=1.001", "fsdp"},
                                           Broken{"fsdp_double_divide", "fsdp-double-divide", "fsdp"},
                                           Broken{"tp_no_input_reduce", "tp-no-input-reduce", "tp"},
                                           Broken{"pp_double_microbatch", "pp-double-microbatch", "pp-1f1b", "pp"}),
                         [](const auto& info) { return info.param.tag; });

}  // namespace
}  // namespace ddx::testing
