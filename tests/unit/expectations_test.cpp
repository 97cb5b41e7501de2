// The per-SKU expectations table (harness/validate/expectations.h): device names as NVML and CUDA print
// them pick the right row; a user's file adds and replaces rows; bad files are one-line errors.
#include <gtest/gtest.h>

#include <fstream>

#include "ddx/errors/errors.h"
#include "harness/validate/expectations.h"

namespace ddx::validate {
namespace {

std::string sku_of(const std::string& device) {
  static const auto table = shipped_expectations();
  const SkuExpectation* e = find_sku(table, device);
  return e ? e->sku : "";
}

TEST(Expectations, DeviceNamesPickTheirRow) {
  EXPECT_EQ(sku_of("NVIDIA H100 80GB HBM3"), "H100 SXM");
  EXPECT_EQ(sku_of("NVIDIA H100 PCIe"), "H100 PCIe");
  EXPECT_EQ(sku_of("NVIDIA H200"), "H200 SXM");
  EXPECT_EQ(sku_of("NVIDIA A100-SXM4-80GB"), "A100 SXM 80GB");
  EXPECT_EQ(sku_of("NVIDIA A100-SXM4-40GB"), "A100 SXM 40GB");
  EXPECT_EQ(sku_of("NVIDIA L40S"), "L40S");
  EXPECT_EQ(sku_of("AMD Instinct MI300X"), "MI300X");
  EXPECT_EQ(sku_of("Intel(R) Xeon(R) Platinum 8480+"), "");
  for (const auto& row : shipped_expectations()) {
    EXPECT_FALSE(row.source.empty()) << row.sku;
    EXPECT_GT(row.peak_tflops.at("bf16"), row.peak_tflops.at("fp32")) << row.sku;
  }
}

TEST(Expectations, AUsersFileAddsAndReplacesRows) {
  const std::string path = ::testing::TempDir() + "/expectations.json";
  std::ofstream(path) << R"([{"sku": "H100 SXM", "match": ["H100"], "peak_tflops": {"bf16": 700}, "source": "our acceptance"},
                             {"sku": "Xeon 8480", "match": ["Xeon", "8480"], "peak_tflops": {"fp32": 5.2}, "memory_gbs": 300}])";
  const auto rows = expectations_with(path);
  const SkuExpectation* h100 = find_sku(rows, "NVIDIA H100 80GB HBM3");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->peak_tflops.at("bf16"), 700);
  EXPECT_EQ(h100->source, "our acceptance");
  const SkuExpectation* xeon = find_sku(rows, "Intel(R) Xeon(R) Platinum 8480+");
  ASSERT_NE(xeon, nullptr);
  EXPECT_EQ(xeon->memory_gbs, 300);
  EXPECT_EQ(rows.size(), shipped_expectations().size() + 1);
}

TEST(Expectations, BadFilesAreOneLineErrorsNamingTheRow) {
  const std::string path = ::testing::TempDir() + "/bad-expectations.json";
  std::ofstream(path) << R"([{"sku": "X", "match": ["X"]}, {"match": ["Y"]}])";
  try {
    expectations_with(path);
    FAIL() << "accepted a row without a sku";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": row 2"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "{}";
  EXPECT_THROW(expectations_with(path), UsageError);
  EXPECT_THROW(expectations_with(path + ".missing"), UsageError);
}

// The message is the rule the row breaks (docs/validate.md), never the JSON library's own text
// ("[json.exception.out_of_range.403] key 'sku' not found").
std::string error_of(const std::string& rows) {
  const std::string path = ::testing::TempDir() + "/rule-expectations.json";
  std::ofstream(path) << rows;
  try {
    expectations_with(path);
  } catch (const UsageError& e) {
    const std::string text = e.what();
    return text.rfind("--expectations " + path + ": ", 0) == 0 ? text.substr(path.size() + 17) : text;
  }
  return "accepted";
}

TEST(Expectations, ABadRowIsOneLineNamingTheRowAndTheRule) {
  const std::string ok = R"({"sku": "X", "match": ["X"]})";
  EXPECT_EQ(error_of("[" + ok + R"(, {"match": ["Y"]}])"), "row 2: needs a sku and at least one match string");
  EXPECT_EQ(error_of(R"([{"sku": "Y"}])"), "row 1: needs a sku and at least one match string");
  EXPECT_EQ(error_of(R"([{"sku": "Y", "match": "Y"}])"), "row 1: needs a sku and at least one match string");
  EXPECT_EQ(error_of(R"([{"sku": 7, "match": ["Y"]}])"), "row 1: needs a sku and at least one match string");
  EXPECT_EQ(error_of("[" + ok + ", 3]"), "row 2: must be an object ({\"sku\", \"match\", ...})");
  EXPECT_EQ(error_of(R"([{"sku": "Y", "match": ["Y"], "exclude": "PCIe"}])"), "row 1: exclude must be a list of strings");
  EXPECT_EQ(error_of(R"([{"sku": "Y", "match": ["Y"], "peak_tflops": {"bf16": "fast"}}])"),
            "row 1: peak_tflops must map dtypes to TFLOP/s above 0 ({\"bf16\": 989.4})");
  EXPECT_EQ(error_of(R"([{"sku": "Y", "match": ["Y"], "memory_gbs": "3.3 TB/s"}])"),
            "row 1: memory_gbs must be a number of GB/s above 0");
  EXPECT_EQ(error_of(R"([{"sku": "Y", "match": ["Y"], "source": 2024}])"), "row 1: source must be a string");
  EXPECT_EQ(error_of("[" + ok + "]"), "accepted");
}

}  // namespace
}  // namespace ddx::validate
