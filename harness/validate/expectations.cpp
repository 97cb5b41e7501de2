#include "harness/validate/expectations.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "ddx/errors/errors.h"

namespace ddx::validate {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool is_string_list(const nlohmann::json& j) {
  return j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& x) { return x.is_string(); });
}

// One row of an --expectations file, every field checked against the rule the docs state, so a
// bad row is one line naming it and the rule it breaks (`where` names the file and the row).
SkuExpectation parse_row(const nlohmann::json& r, const std::string& where, const std::string& path) {
  if (!r.is_object()) throw UsageError(where + ": must be an object ({\"sku\", \"match\", ...})");
  const bool has_sku = r.contains("sku") && r["sku"].is_string() && !r["sku"].get<std::string>().empty();
  const bool has_match = r.contains("match") && is_string_list(r["match"]) && !r["match"].empty();
  if (!has_sku || !has_match) throw UsageError(where + ": needs a sku and at least one match string");
  SkuExpectation e;
  e.sku = r["sku"].get<std::string>();
  e.match = r["match"].get<std::vector<std::string>>();
  if (r.contains("exclude")) {
    if (!is_string_list(r["exclude"])) throw UsageError(where + ": exclude must be a list of strings");
    e.exclude = r["exclude"].get<std::vector<std::string>>();
  }
  if (r.contains("peak_tflops")) {
    const auto& peaks = r["peak_tflops"];
    const bool numbers = peaks.is_object() && std::all_of(peaks.begin(), peaks.end(), [](const nlohmann::json& x) {
                           return x.is_number() && x.get<double>() > 0;
                         });
    if (!numbers) throw UsageError(where + ": peak_tflops must map dtypes to TFLOP/s above 0 ({\"bf16\": 989.4})");
    e.peak_tflops = peaks.get<std::map<std::string, double>>();
  }
  if (r.contains("memory_gbs")) {
    if (!r["memory_gbs"].is_number() || r["memory_gbs"].get<double>() <= 0) {
      throw UsageError(where + ": memory_gbs must be a number of GB/s above 0");
    }
    e.memory_gbs = r["memory_gbs"].get<double>();
  }
  if (r.contains("source") && !r["source"].is_string()) throw UsageError(where + ": source must be a string");
  e.source = r.value("source", path);
  return e;
}

}  // namespace

// Dense (no structured sparsity) peaks at boost clock, as each datasheet prints them.
std::vector<SkuExpectation> shipped_expectations() {
  return {
      {"H100 SXM", {"H100"}, {"PCIe", "NVL"},
       {{"bf16", 989.4}, {"fp16", 989.4}, {"tf32", 494.7}, {"fp32", 66.9}}, 3350,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM5 80GB)"},
      {"H100 PCIe", {"H100", "PCIe"}, {},
       {{"bf16", 756.5}, {"fp16", 756.5}, {"tf32", 378}, {"fp32", 51.2}}, 2000,
       "NVIDIA H100 Tensor Core GPU datasheet (PCIe 80GB)"},
      {"H200 SXM", {"H200"}, {"NVL"},
       {{"bf16", 989.4}, {"fp16", 989.4}, {"tf32", 494.7}, {"fp32", 66.9}}, 4800,
       "NVIDIA H200 Tensor Core GPU datasheet (SXM 141GB)"},
      {"A100 SXM 80GB", {"A100", "80GB"}, {"PCIe"},
       {{"bf16", 312}, {"fp16", 312}, {"tf32", 156}, {"fp32", 19.5}}, 2039,
       "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)"},
      {"A100 SXM 40GB", {"A100"}, {"PCIe", "80GB"},
       {{"bf16", 312}, {"fp16", 312}, {"tf32", 156}, {"fp32", 19.5}}, 1555,
       "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB)"},
      {"L40S", {"L40S"}, {},
       {{"bf16", 362.05}, {"fp16", 362.05}, {"tf32", 183}, {"fp32", 91.6}}, 864,
       "NVIDIA L40S GPU datasheet"},
      {"MI300X", {"MI300X"}, {},
       {{"bf16", 1307.4}, {"fp16", 1307.4}, {"tf32", 653.7}, {"fp32", 163.4}}, 5300,
       "AMD Instinct MI300X accelerator datasheet"},
  };
}

std::vector<SkuExpectation> expectations_with(const std::string& path) {
  std::vector<SkuExpectation> rows = shipped_expectations();
  std::ifstream in(path);
  if (!in) throw UsageError("--expectations " + path + ": cannot read the file");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    throw UsageError("--expectations " + path + ": expected a JSON list of rows ({\"sku\", \"match\", \"peak_tflops\", ...})");
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const SkuExpectation e = parse_row(j[i], "--expectations " + path + ": row " + std::to_string(i + 1), path);
    const auto same = std::find_if(rows.begin(), rows.end(), [&](const SkuExpectation& x) { return x.sku == e.sku; });
    if (same != rows.end()) rows.erase(same);
    rows.insert(rows.begin(), e);  // the user's rows first: they win over shipped ones that also fit
  }
  return rows;
}

const SkuExpectation* find_sku(const std::vector<SkuExpectation>& rows, const std::string& device) {
  const std::string name = lower(device);
  for (const auto& r : rows) {
    const bool all = std::all_of(r.match.begin(), r.match.end(),
                                 [&](const std::string& m) { return name.find(lower(m)) != std::string::npos; });
    const bool none = std::none_of(r.exclude.begin(), r.exclude.end(),
                                   [&](const std::string& m) { return name.find(lower(m)) != std::string::npos; });
    if (all && none) return &r;
  }
  return nullptr;
}

}  // namespace ddx::validate
