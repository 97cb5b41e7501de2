#pragma once
// What a device can do, per SKU: dense matrix-multiply peaks per dtype and memory bandwidth
// from the vendors' public datasheets (each row names its source; docs/validate.md lists them),
// so a measured figure reads as a fraction of the part's peak. The device name a probe reports
// (NVML's or CUDA's, "NVIDIA H100 80GB HBM3") picks the row. `--expectations FILE` adds rows,
// or replaces a shipped row of the same sku: a cluster's own acceptance figures.
#include <map>
#include <string>
#include <vector>

namespace ddx::validate {

struct SkuExpectation {
  std::string sku;                      // "H100 SXM"
  std::vector<std::string> match;       // every one of these appears in the device name ...
  std::vector<std::string> exclude;     // ... and none of these
  std::map<std::string, double> peak_tflops;  // dense, per dtype: "bf16", "fp16", "tf32", "fp32"
  double memory_gbs = 0;                // device memory bandwidth
  std::string source;
};

std::vector<SkuExpectation> shipped_expectations();

// The shipped rows with the file's rows added (a row whose sku is shipped replaces it). The
// file is a JSON list of rows with the fields above. Throws UsageError naming the file and the
// row on bad input.
std::vector<SkuExpectation> expectations_with(const std::string& path);

// The first row whose match/exclude fit `device` (case-insensitive), or null.
const SkuExpectation* find_sku(const std::vector<SkuExpectation>& rows, const std::string& device);

}  // namespace ddx::validate
