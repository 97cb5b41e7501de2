#pragma once
// What NVML says about one GPU, as plain data: the health checks (gpu_checks.h) judge these,
// so they are unit-tested on planted facts without a GPU. A field NVML does not support on
// this GPU (ECC on a consumer card, NVLink on PCIe parts) stays empty.
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddx::gpu {

struct GpuFacts {
  int index = 0;                // NVML index on its host
  std::string host;
  int rank = -1;                // the rank that read it (-1: read by one process for its host)
  std::string name, uuid, pci_bus_id;
  std::optional<unsigned long long> ecc_uncorrected_volatile, ecc_uncorrected_aggregate, ecc_corrected_volatile;
  std::optional<unsigned> remapped_corrected, remapped_uncorrected;
  std::optional<bool> remap_pending, remap_failure;
  std::optional<unsigned long long> clock_event_reasons;
  std::optional<unsigned> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
  std::optional<unsigned> nvlinks_active, nvlinks_total;  // links that exist on this GPU, and are up
  std::optional<unsigned> temperature_c, slowdown_temperature_c;
  std::optional<unsigned> power_mw, power_limit_mw, power_default_limit_mw;
  // Page retirement (GPUs before Ampere; row remapping replaced it): pages retired after two
  // single-bit errors at one address or after a double-bit error, and whether some wait for a reset.
  std::optional<unsigned> retired_pages_single_bit, retired_pages_double_bit;
  std::optional<bool> retired_pages_pending;
  std::optional<unsigned> pcie_replays;  // PCIe link-level retransmissions since the driver loaded
  std::map<int, int> xids;      // XID code -> events in the kernel log since boot for this GPU
  bool xids_readable = false;   // the kernel log could be read (root, or dmesg_restrict=0)
};

nlohmann::json to_json(const GpuFacts& f);
GpuFacts facts_from_json(const nlohmann::json& j);

}  // namespace ddx::gpu

namespace ddx {
class Nvml;
}  // namespace ddx

namespace ddx::gpu {

// Every GPU NVML sees on this host (`only` >= 0: just that index), with XIDs from `kernel_log`.
std::vector<GpuFacts> read_gpu_facts(const Nvml& nvml, const std::string& host, int only,
                                     const std::vector<std::string>& kernel_log, bool kernel_log_readable);

}  // namespace ddx::gpu
