// `ddx validate` end to end at 2 ranks (every stage PASSes, one report), and with a planted
// wrong collective (DDX_FAULT=corrupt-collective) the report FAILs at the selfcheck and runs nothing after.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::vector<std::string> validate(const std::string& out) {
  return {DDX_BIN, "validate", "--np", "2", "--out", out, "--max-bytes", "64K", "--parity-steps", "2",
          "--stage-timeout", "240"};
}

TEST(Validate, EveryStagePassesAtTwoRanksAndOneReportLinksThemAll) {
  const std::string dir = scratch_dir("validate", "pass");
  RunResult r = run_in(dir, validate(dir + "/report"), {}, 550);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* stage : {"doctor", "selfcheck", "bandwidth", "pairwise links", "parity"}) {
    EXPECT_TRUE(has(r.output, stage)) << r.output;
  }
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  EXPECT_TRUE(report["passed"].get<bool>());
  ASSERT_EQ(report["stages"].size(), 5u);
  for (const auto& s : report["stages"]) EXPECT_TRUE(s["passed"].get<bool>()) << s.dump();
  for (const char* file : {"doctor.json", "selfcheck.json", "busbw.svg", "parity/report.json", "validate.md"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/report/" + file)) << file;
  }
  EXPECT_TRUE(has(read_file(dir + "/report/validate.md"), "![busbw.svg](busbw.svg)"));
}

TEST(Validate, APlantedWrongCollectiveFailsAtTheSelfcheckAndStops) {
  const std::string dir = scratch_dir("validate", "planted");
  RunResult r = run_in(dir, validate(dir + "/report"), {{"DDX_FAULT", "corrupt-collective@rank=1"}}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "validate: FAIL")) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  EXPECT_FALSE(report["passed"].get<bool>());
  const auto& stages = report["stages"];
  EXPECT_TRUE(stages[0]["passed"].get<bool>()) << stages[0].dump();   // doctor
  EXPECT_FALSE(stages[1]["passed"].get<bool>()) << stages[1].dump();  // selfcheck
  EXPECT_TRUE(stages[1]["ran"].get<bool>());
  // The stage's own summary line, not the launcher's table.
  EXPECT_TRUE(has(stages[1]["summary"].get<std::string>(), "selfcheck: ")) << stages[1].dump();
  EXPECT_TRUE(has(stages[1]["summary"].get<std::string>(), " FAILED")) << stages[1].dump();
  for (size_t i = 2; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
}

}  // namespace
}  // namespace ddx::testing
