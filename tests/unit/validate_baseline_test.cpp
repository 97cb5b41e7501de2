// `ddx validate --baseline` (harness/validate/validate_baseline.cpp): a steady figure is held to the
// margin, a figure this machine measures noisily only to its own jitter; bad files are errors.
#include <gtest/gtest.h>

#include <fstream>

#include "ddx/errors/errors.h"
#include "harness/validate/validate.h"

namespace ddx::validate {
namespace {

TEST(ValidateBaseline, TheAllowedDropIsTheMarginOrThreeTimesTheJitter) {
  EXPECT_DOUBLE_EQ(allowed_drop({10, 0}, {9, 0}, 0.1), 0.1);
  EXPECT_NEAR(allowed_drop({10, 0.05}, {9, 0.01}, 0.1), 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(allowed_drop({10, 0.5}, {9, 0.01}, 0.1), 0.9);
}

TEST(ValidateBaseline, SteadyFiguresRegressNoisyOnesWithinTheirNoiseDoNot) {
  const std::map<std::string, Figure> before = {{"compute fp32 n=512 TFLOP/s @ a:0", {1.0, 0.01}},
                                                {"bandwidth reduce busbw GB/s", {0.3, 0.45}},
                                                {"memory host copy GB/s @ a:0", {40, 0.02}},
                                                {"compute fp32 n=512 TFLOP/s @ b:0", {1.0, 0.01}}};
  const std::map<std::string, Figure> now = {{"compute fp32 n=512 TFLOP/s @ a:0", {0.8, 0.01}},
                                             {"bandwidth reduce busbw GB/s", {0.1, 0.4}},
                                             {"memory host copy GB/s @ a:0", {39, 0.02}}};
  const StageResult r = compare_with_baseline(now, before, 0.1);
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.details["regressions"].size(), 1u) << r.details.dump();
  EXPECT_EQ(r.details["regressions"][0]["figure"], "compute fp32 n=512 TFLOP/s @ a:0");
  EXPECT_EQ(r.details["compared"], 3);
  EXPECT_EQ(r.details["missing"][0], "compute fp32 n=512 TFLOP/s @ b:0");
  EXPECT_NE(r.summary.find("worst: compute fp32 n=512 TFLOP/s @ a:0 1 -> 0.8 (-20%)"), std::string::npos) << r.summary;
  EXPECT_TRUE(compare_with_baseline(before, before, 0.1).passed);
}

TEST(ValidateBaseline, BaselinesAreReadWithOrWithoutJitterAndBadOnesAreErrors) {
  const std::string path = ::testing::TempDir() + "/baseline.json";
  std::ofstream(path) << R"({"figures": {"a": 2.5, "b": {"value": 3, "jitter": 0.2}}})";
  const auto figures = read_baseline(path);
  EXPECT_EQ(figures.at("a").value, 2.5);
  EXPECT_EQ(figures.at("a").jitter, 0);
  EXPECT_EQ(figures.at("b").jitter, 0.2);
  std::ofstream(path) << R"({"figures": {"a": "fast"}})";
  EXPECT_THROW(read_baseline(path), UsageError);
  std::ofstream(path) << "not json";
  EXPECT_THROW(read_baseline(path), UsageError);
  EXPECT_THROW(read_baseline(path + ".missing"), UsageError);
}

}  // namespace
}  // namespace ddx::validate
