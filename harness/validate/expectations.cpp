#include "harness/validate/expectations.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "ddx/errors.h"

namespace ddx::validate {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
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
    const auto& r = j[i];
    const std::string where = "--expectations " + path + ": row " + std::to_string(i + 1);
    try {
      SkuExpectation e;
      e.sku = r.at("sku").get<std::string>();
      e.match = r.at("match").get<std::vector<std::string>>();
      e.exclude = r.value("exclude", std::vector<std::string>{});
      e.peak_tflops = r.value("peak_tflops", std::map<std::string, double>{});
      e.memory_gbs = r.value("memory_gbs", 0.0);
      e.source = r.value("source", path);
      if (e.sku.empty() || e.match.empty()) throw UsageError(where + ": needs a sku and at least one match string");
      const auto same = std::find_if(rows.begin(), rows.end(), [&](const SkuExpectation& x) { return x.sku == e.sku; });
      if (same != rows.end()) rows.erase(same);
      rows.insert(rows.begin(), e);  // the user's rows first: they win over shipped ones that also fit
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(where + ": " + e.what());
    }
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
