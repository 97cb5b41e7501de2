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

// Issue 46, item 6: the step key, a curve that stops early, a step key that matches nothing.
// The reference has steps 1..8; a run logged every 2 steps (JSON lines with "iteration", a
// TensorBoard CSV with "Step") has the same loss at steps 2, 4, 6 and 8: only its step key says
// so, since its rows 1..4 hold other steps' values.
class CompareSteps : public Compare {
 protected:
  void SetUp() override {
    Compare::SetUp();
    write(dir_ + "/ref8.jsonl",
          "{\"step\":1,\"loss\":10.5}\n{\"step\":2,\"loss\":9.25}\n{\"step\":3,\"loss\":8.125}\n"
          "{\"step\":4,\"loss\":7.0}\n{\"step\":5,\"loss\":6.5}\n{\"step\":6,\"loss\":6.0}\n"
          "{\"step\":7,\"loss\":5.75}\n{\"step\":8,\"loss\":5.5}\n");
    write(dir_ + "/every2.jsonl",
          "{\"iteration\":2,\"train/loss\":9.25}\n{\"iteration\":4,\"train/loss\":7.0}\n"
          "{\"iteration\":6,\"train/loss\":6.0}\n{\"iteration\":8,\"train/loss\":5.5}\n");
    write(dir_ + "/every2.csv", "Wall time,Step,Value\n100.5,2,9.25\n101.5,4,7.0\n102.5,6,6.0\n103.5,8,5.5\n");
    // The same run, died after step 3.
    write(dir_ + "/died.jsonl",
          "{\"step\":1,\"loss\":10.5}\n{\"step\":2,\"loss\":9.25}\n{\"step\":3,\"loss\":8.125}\n");
  }
};

TEST_F(CompareSteps, StepKeysAlignCurvesWhoseStepsAreNotTheirRowNumbers) {
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/every2.jsonl", dir_ + "/every2.csv",
                              "--key", "loss", "--key", "train/loss", "--key", "Value", "--step-key", "step",
                              "--step-key", "iteration", "--step-key", "Step"}, {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* file : {"every2.jsonl", "every2.csv"}) {
    EXPECT_TRUE(has(r.output, std::string(file) + ": 4 common steps; agrees; largest |diff| 0 at step 2, largest "
                                                  "relative 0, 0.00 x the tolerance (4 steps only in the reference, 0 "
                                                  "only in this curve)\n"))
        << file << "\n" << r.output;
  }
  EXPECT_TRUE(has(r.output, "compare: 2 curves against ref8.jsonl: all agree")) << r.output;
  EXPECT_FALSE(has(r.output, "row numbers")) << r.output;

  // Without its step key the JSON lines are read by position: rows 1..4 hold steps 2..8's losses,
  // and the output says the steps are row numbers.
  RunResult by_row = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/every2.jsonl", "--key", "loss",
                                   "--key", "train/loss"}, {}, 30);
  EXPECT_EQ(by_row.exit_code, 1) << by_row.output;
  EXPECT_TRUE(has(by_row.output, "every2.jsonl: 4 common steps; DIFFERS from step 1: 9.25 against the reference's 10.5 "))
      << by_row.output;
  EXPECT_TRUE(has(by_row.output, "; no 'step' in it: its steps are its row numbers\n")) << by_row.output;
}

// A CI regression check must fail a run that died early: its steps agree, and it still differs,
// unless --allow-shorter says a shorter run is meant. A step that differs is never excused.
TEST_F(CompareSteps, ACurveThatStopsEarlyDiffersUnlessAllowed) {
  RunResult died = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/died.jsonl"}, {}, 30);
  EXPECT_EQ(died.exit_code, 1) << died.output;
  EXPECT_TRUE(has(died.output, "died.jsonl: 3 common steps; DIFFERS: it stops at step 3, the reference goes on to step 8 "
                               "(--allow-shorter compares only the steps it has); largest |diff| 0 at step 1"))
      << died.output;
  EXPECT_TRUE(has(died.output, "(5 steps only in the reference, 0 only in this curve)\n")) << died.output;
  EXPECT_TRUE(has(died.output, "compare: 1 curve against ref8.jsonl: 1 differ\n")) << died.output;

  RunResult allowed = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/died.jsonl", "--allow-shorter"},
                             {}, 30);
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_TRUE(has(allowed.output, "died.jsonl: 3 common steps; agrees on the steps it has; it stops at step 3, the "
                                  "reference goes on to step 8 (--allow-shorter); largest |diff| 0 at step 1"))
      << allowed.output;
  EXPECT_TRUE(has(allowed.output, "compare: 1 curve against ref8.jsonl: all agree\n")) << allowed.output;

  // Longer than the reference is not shorter: the reference's every step is there.
  RunResult longer = run_in(dir_, {DDX_BIN, "compare", dir_ + "/died.jsonl", dir_ + "/ref8.jsonl"}, {}, 30);
  EXPECT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_TRUE(has(longer.output, "ref8.jsonl: 3 common steps; agrees; largest |diff| 0 at step 1, largest relative 0, "
                                 "0.00 x the tolerance (0 steps only in the reference, 5 only in this curve)\n"))
      << longer.output;

  // Died and wrong: the differing step is named first, the early stop after it, and
  // --allow-shorter does not excuse the step.
  write(dir_ + "/died-wrong.jsonl", "{\"step\":1,\"loss\":10.5}\n{\"step\":2,\"loss\":9.5}\n");
  RunResult wrong = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/died-wrong.jsonl",
                                  "--allow-shorter"}, {}, 30);
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_TRUE(has(wrong.output, "died-wrong.jsonl: 2 common steps; DIFFERS from step 2: 9.5 against the reference's 9.25 "
                                "(|diff| 0.25, relative 0.027); it stops at step 2, the reference goes on to step 8; "))
      << wrong.output;
}

// A field whose values repeat (an epoch, a resumed run's records appended again) does not name
// steps: one line naming the file, the key, the step and where it repeats; exit 2, nothing written.
TEST_F(CompareSteps, AStepKeyWhoseValuesRepeatIsOneLineNamingIt) {
  write(dir_ + "/epochs.jsonl", "{\"step\":1,\"epoch\":0,\"loss\":10.0}\n{\"step\":2,\"epoch\":0,\"loss\":9.5}\n");
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/epochs.jsonl", dir_ + "/epochs.jsonl", "--step-key", "epoch",
                              "--plot", dir_ + "/e.svg"}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "ddx: error: " + dir_ + "/epochs.jsonl: step 0 under 'epoch' comes twice (records 1 and 2): a step "
                      "key must name each record once; pick the field with --step-key\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/e.svg"));
  // The same file by its real steps agrees with itself.
  EXPECT_EQ(run_in(dir_, {DDX_BIN, "compare", dir_ + "/epochs.jsonl", dir_ + "/epochs.jsonl"}, {}, 30).exit_code, 0);
}

// A file that is not text (a checkpoint, an image) is one line saying so, not a CSV whose binary
// "header" is printed to the terminal; exit 2, nothing written.
TEST_F(CompareSteps, ABinaryFileIsOneLineSayingItIsNotACurve) {
  write(dir_ + "/final.safetensors", std::string("\x08\x01\0\0\0\0\0\0{\"a\":1}\r", 16));
  RunResult r = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/final.safetensors", "--plot",
                              dir_ + "/b.svg"}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "ddx: error: " + dir_ + "/final.safetensors: not a text file (byte 0 is binary): a curve is "
                      "JSON lines or CSV\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/b.svg"));
}

// A step key the user names must be in the file: a name that matches nothing is one line naming
// the key and the file, exit 2, nothing written; not a silent fall back to row numbers.
TEST_F(CompareSteps, AStepKeyThatMatchesNothingIsOneLineNamingIt) {
  RunResult jsonl = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/every2.jsonl", "--key", "loss",
                                  "--key", "train/loss", "--step-key", "step", "--step-key", "iter", "--plot",
                                  dir_ + "/c.svg"}, {}, 30);
  EXPECT_EQ(jsonl.exit_code, 2) << jsonl.output;
  EXPECT_EQ(jsonl.output, "ddx: error: " + dir_ + "/every2.jsonl: no 'iter' in any record with 'train/loss' (the "
                          "steps; pick the field with --step-key)\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/c.svg")) << "nothing written on bad input";

  RunResult csv = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ref8.jsonl", dir_ + "/every2.csv", "--key", "loss", "--key",
                                "Value", "--step-key", "step", "--step-key", "step"}, {}, 30);
  EXPECT_EQ(csv.exit_code, 2) << csv.output;
  EXPECT_EQ(csv.output, "ddx: error: " + dir_ + "/every2.csv: no column 'step' for the steps (columns: Wall time, Step, "
                        "Value); pick one with --step-key\n");

  // One --step-key for every file, and the CSV lacks it. Not named, the same pair compares the
  // CSV by row number (as ACsvThatDriftsIsNamedAtItsFirstBadStep does).
  RunResult one_for_all = run_in(dir_, {DDX_BIN, "compare", dir_ + "/ddx.jsonl", dir_ + "/run.csv", "--step-key",
                                        "step"}, {}, 30);
  EXPECT_EQ(one_for_all.exit_code, 2) << one_for_all.output;
  EXPECT_EQ(one_for_all.output, "ddx: error: " + dir_ + "/run.csv: no column 'step' for the steps (columns: wall_time, "
                                "loss); pick one with --step-key\n");
}

}  // namespace
}  // namespace ddx::testing
