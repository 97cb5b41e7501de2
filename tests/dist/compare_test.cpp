// `ddx compare` on curves written the ways the ecosystem writes them: ddx's metrics.jsonl, JSON
// lines with another key, CSV with a named column (and none for the step). Agreeing curves exit
// 0, a curve that leaves the tolerance exits 1 naming the step; the SVG is written when --plot
// names it and nothing otherwise; bad input is one line naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class Compare : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("compare", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    // ddx's own metrics (other records between the steps), another logger's JSON lines, a CSV.
    write(dir_ + "/ddx.jsonl",
          "{\"event\":\"start\"}\n{\"step\":1,\"loss\":10.5,\"lr\":0.001}\n{\"step\":2,\"loss\":9.25}\n"
          "{\"step\":3,\"loss\":8.125}\n{\"step\":4,\"loss\":7.0}\n");
    write(dir_ + "/other.jsonl",
          "{\"iteration\":1,\"train/loss\":10.5}\n{\"iteration\":2,\"train/loss\":9.2500001}\n"
          "{\"iteration\":3,\"train/loss\":8.125}\n{\"iteration\":4,\"train/loss\":7.0}\n");
    write(dir_ + "/run.csv", "wall_time,loss\n1.0,10.5\n2.0,9.25\n3.0,8.5\n4.0,7.9\n");
  }
  std::string dir_;
};

TEST_F(Compare, CurvesInEveryLayoutThatAgreeExitZeroAndPlot) {
  // One key per file: ddx's "loss" by "step", the other logger's "train/loss" by "iteration".
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/other.jsonl", "--key", "loss",
                              "--key", "train/loss", "--step-key", "step", "--step-key", "iteration", "--plot",
                              dir_ + "/c.svg"}, {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "other.jsonl: 4 common steps; agrees; largest |diff| 1e-07 at step 2")) << r.output;
  EXPECT_TRUE(has(r.output, "compare: 1 curve against ddx.jsonl: all agree")) << r.output;
  EXPECT_TRUE(has(read_file(dir_ + "/c.svg"), "<svg")) << "the plot";

  // One key for every file: the other logger's file has no "loss".
  RunResult one_key = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/other.jsonl"}, {}, 30);
  EXPECT_EQ(one_key.exit_code, 2) << one_key.output;
  EXPECT_TRUE(has(one_key.output, "other.jsonl: no values under 'loss' (read as jsonl; pick the field with --key)"))
      << one_key.output;
  RunResult two_of_three = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/other.jsonl", dir_ + "/run.csv",
                                         "--key", "loss", "--key", "train/loss"}, {}, 30);
  EXPECT_EQ(two_of_three.exit_code, 2) << two_of_three.output;
  EXPECT_TRUE(has(two_of_three.output, "got 2 for 3 files")) << two_of_three.output;
}

TEST_F(Compare, ACsvThatDriftsIsNamedAtItsFirstBadStep) {
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv", "--rtol", "1e-3", "--plot",
                              dir_ + "/drift.svg"}, {}, 30);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // No step column in the CSV: rows are steps 1, 2, ...
  EXPECT_TRUE(has(r.output, "run.csv: 4 common steps; DIFFERS from step 3: 8.5 against the reference's 8.125 (|diff| 0.375, "
                            "relative 0.0462)"))
      << r.output;
  EXPECT_TRUE(has(r.output, "largest |diff| 0.9 at step 4")) << r.output;
  EXPECT_TRUE(has(r.output, "compare: 1 curve against ddx.jsonl: 1 differ")) << r.output;
  const std::string svg = read_file(dir_ + "/drift.svg");
  EXPECT_TRUE(has(svg, "run.csv")) << "legend";
  EXPECT_TRUE(has(svg, "tolerance")) << "legend";
}

// No file the user did not name: without --plot nothing is written, in the current folder or
// anywhere (issue 44, item 11: it used to write ./compare.svg).
TEST_F(Compare, WritesNoFileUnlessAPlotIsNamed) {
  // Run inside an empty folder of its own (env -C), with the inputs beside it.
  const std::string cwd = dir_ + "/cwd";
  std::filesystem::create_directories(cwd);
  RunResult r = run_in(dir_, {"/usr/bin/env", "-C", cwd, DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv",
                              "--rtol", "0.2"}, {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "compare: 1 curve against ddx.jsonl: all agree")) << r.output;
  EXPECT_FALSE(has(r.output, "plot")) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(cwd)) << "written into the current folder";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"cwd", "ddx.jsonl", "other.jsonl", "output.txt", "run.csv"}));
}

// A --plot that cannot be written is one line naming it, exit 2, before any result is printed
// (issue 44, item 7: it was a stack trace, exit 134, with the results lost in stdout's buffer).
TEST_F(Compare, APlotThatCannotBeWrittenIsOneLineBeforeAnyResult) {
  const std::string under_a_file = dir_ + "/ddx.jsonl/c.svg";
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv", "--plot", under_a_file}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "ddx: error: --plot " + under_a_file + " cannot be written: " + dir_ +
                          "/ddx.jsonl is a file, not a folder\n");
  RunResult proc = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv", "--plot", "/proc/c.svg"},
                          {}, 30);
  EXPECT_EQ(proc.exit_code, 2) << proc.output;
  EXPECT_EQ(proc.output.rfind("ddx: error: --plot /proc/c.svg cannot be written: /proc does not take new files (", 0), 0u)
      << proc.output;
  EXPECT_EQ(std::count(proc.output.begin(), proc.output.end(), '\n'), 1) << proc.output;
}

TEST_F(Compare, ToleranceFlagsDecide) {
  auto run = [&](const std::string& rtol, const std::string& atol) {
    return run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv", "--rtol", rtol, "--atol", atol,
                         "--plot", ""}, {}, 30);
  };
  EXPECT_EQ(run("0", "1").exit_code, 0);
  EXPECT_EQ(run("0.2", "0").exit_code, 0);
  EXPECT_EQ(run("0", "0.5").exit_code, 1);
}

TEST_F(Compare, BadInputIsOneLineNamingTheFile) {
  write(dir_ + "/broken.jsonl", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":\n");
  RunResult broken = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/broken.jsonl"}, {}, 30);
  EXPECT_EQ(broken.exit_code, 2) << broken.output;
  EXPECT_EQ(broken.output.rfind("ddx: error: " + dir_ + "/broken.jsonl:2: not a JSON object", 0), 0u) << broken.output;

  write(dir_ + "/nocol.csv", "step,accuracy\n1,0.5\n");
  RunResult nocol = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/nocol.csv"}, {}, 30);
  EXPECT_EQ(nocol.exit_code, 2) << nocol.output;
  EXPECT_TRUE(has(nocol.output, "nocol.csv: no column 'loss' (columns: step, accuracy); pick one with --key"))
      << nocol.output;

  write(dir_ + "/text.csv", "step,loss\n1,abc\n");
  RunResult text = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/text.csv"}, {}, 30);
  EXPECT_EQ(text.exit_code, 2) << text.output;
  EXPECT_TRUE(has(text.output, "text.csv:2: 'abc' is not a number")) << text.output;

  RunResult one = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl"}, {}, 30);
  EXPECT_EQ(one.exit_code, 2) << one.output;
  RunResult missing = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/nosuch.jsonl", "--plot",
                                    dir_ + "/c.svg"}, {}, 30);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(has(missing.output, "nosuch.jsonl")) << missing.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/c.svg")) << "nothing written on bad input";
  RunResult unreadable = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/text.csv", "--plot",
                                       dir_ + "/c.svg"}, {}, 30);
  EXPECT_EQ(unreadable.exit_code, 2) << unreadable.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/c.svg")) << "nothing written on bad input";
}

}  // namespace
}  // namespace ddx::testing
