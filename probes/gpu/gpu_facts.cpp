#include "gpu/gpu_facts.h"

#include "ddx/nvml.h"
#include "gpu/xid_log.h"

namespace ddx::gpu {
namespace {

using nlohmann::json;

template <typename T>
void put(json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? json(*v) : json(nullptr);
}

template <typename T>
void get(const json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j[key].is_null()) v = j[key].get<T>();
}

// A value NVML gives through its last (out) parameter, or nothing when this driver lacks the
// entry point or the GPU does not support it.
template <typename T, typename Fn, typename... Args>
std::optional<T> ask(Fn fn, Args... args) {
  if (!fn) return std::nullopt;
  T value{};
  return fn(args..., &value) == kNvmlSuccess ? std::optional<T>(value) : std::nullopt;
}

// How many pages NVML retired for `cause`: asked with no buffer, it answers the count, with
// NVML_ERROR_INSUFFICIENT_SIZE when there are some (the addresses would not fit).
std::optional<unsigned> retired_pages(const NvmlApi& a, nvmlDevice d, int cause) {
  if (!a.retired_pages) return std::nullopt;
  unsigned count = 0;
  const nvmlReturn r = a.retired_pages(d, cause, &count, nullptr);
  return r == kNvmlSuccess || r == kNvmlInsufficientSize ? std::optional<unsigned>(count) : std::nullopt;
}

}  // namespace

json to_json(const GpuFacts& f) {
  json j = {{"index", f.index}, {"host", f.host}, {"rank", f.rank}, {"name", f.name}, {"uuid", f.uuid},
            {"pci_bus_id", f.pci_bus_id}, {"xids_readable", f.xids_readable}};
  put(j, "ecc_uncorrected_volatile", f.ecc_uncorrected_volatile);
  put(j, "ecc_uncorrected_aggregate", f.ecc_uncorrected_aggregate);
  put(j, "ecc_corrected_volatile", f.ecc_corrected_volatile);
  put(j, "remapped_corrected", f.remapped_corrected);
  put(j, "remapped_uncorrected", f.remapped_uncorrected);
  put(j, "remap_pending", f.remap_pending);
  put(j, "remap_failure", f.remap_failure);
  put(j, "clock_event_reasons", f.clock_event_reasons);
  put(j, "pcie_gen", f.pcie_gen);
  put(j, "pcie_gen_max", f.pcie_gen_max);
  put(j, "pcie_width", f.pcie_width);
  put(j, "pcie_width_max", f.pcie_width_max);
  put(j, "nvlinks_active", f.nvlinks_active);
  put(j, "nvlinks_total", f.nvlinks_total);
  put(j, "temperature_c", f.temperature_c);
  put(j, "slowdown_temperature_c", f.slowdown_temperature_c);
  put(j, "power_mw", f.power_mw);
  put(j, "power_limit_mw", f.power_limit_mw);
  put(j, "power_default_limit_mw", f.power_default_limit_mw);
  put(j, "retired_pages_single_bit", f.retired_pages_single_bit);
  put(j, "retired_pages_double_bit", f.retired_pages_double_bit);
  put(j, "retired_pages_pending", f.retired_pages_pending);
  put(j, "pcie_replays", f.pcie_replays);
  json xids = json::object();
  for (const auto& [code, n] : f.xids) xids[std::to_string(code)] = n;
  j["xids"] = xids;
  return j;
}

GpuFacts facts_from_json(const json& j) {
  GpuFacts f;
  f.index = j.at("index").get<int>();
  f.host = j.at("host").get<std::string>();
  f.rank = j.value("rank", -1);
  f.name = j.value("name", "");
  f.uuid = j.value("uuid", "");
  f.pci_bus_id = j.value("pci_bus_id", "");
  f.xids_readable = j.value("xids_readable", false);
  get(j, "ecc_uncorrected_volatile", f.ecc_uncorrected_volatile);
  get(j, "ecc_uncorrected_aggregate", f.ecc_uncorrected_aggregate);
  get(j, "ecc_corrected_volatile", f.ecc_corrected_volatile);
  get(j, "remapped_corrected", f.remapped_corrected);
  get(j, "remapped_uncorrected", f.remapped_uncorrected);
  get(j, "remap_pending", f.remap_pending);
  get(j, "remap_failure", f.remap_failure);
  get(j, "clock_event_reasons", f.clock_event_reasons);
  get(j, "pcie_gen", f.pcie_gen);
  get(j, "pcie_gen_max", f.pcie_gen_max);
  get(j, "pcie_width", f.pcie_width);
  get(j, "pcie_width_max", f.pcie_width_max);
  get(j, "nvlinks_active", f.nvlinks_active);
  get(j, "nvlinks_total", f.nvlinks_total);
  get(j, "temperature_c", f.temperature_c);
  get(j, "slowdown_temperature_c", f.slowdown_temperature_c);
  get(j, "power_mw", f.power_mw);
  get(j, "power_limit_mw", f.power_limit_mw);
  get(j, "power_default_limit_mw", f.power_default_limit_mw);
  get(j, "retired_pages_single_bit", f.retired_pages_single_bit);
  get(j, "retired_pages_double_bit", f.retired_pages_double_bit);
  get(j, "retired_pages_pending", f.retired_pages_pending);
  get(j, "pcie_replays", f.pcie_replays);
  for (const auto& [code, n] : j.value("xids", json::object()).items()) f.xids[std::stoi(code)] = n.get<int>();
  return f;
}

std::vector<GpuFacts> read_gpu_facts(const Nvml& nvml, const std::string& host, int only,
                                     const std::vector<std::string>& kernel_log, bool kernel_log_readable) {
  const NvmlApi& a = nvml.api();
  std::vector<GpuFacts> gpus;
  unsigned count = 0;
  if (a.device_count(&count) != kNvmlSuccess) return gpus;
  for (unsigned i = 0; i < count; ++i) {
    if (only >= 0 && static_cast<unsigned>(only) != i) continue;
    nvmlDevice d = nullptr;
    if (a.handle_by_index(i, &d) != kNvmlSuccess) continue;
    GpuFacts f;
    f.index = static_cast<int>(i);
    f.host = host;
    char text[96] = {};
    if (a.name(d, text, sizeof text) == kNvmlSuccess) f.name = text;
    if (a.uuid && a.uuid(d, text, sizeof text) == kNvmlSuccess) f.uuid = text;
    nvmlPciInfo pci{};
    if (a.pci_info && a.pci_info(d, &pci) == kNvmlSuccess) f.pci_bus_id = pci.busId;
    f.ecc_uncorrected_volatile = ask<unsigned long long>(a.total_ecc_errors, d, 1, 0);
    f.ecc_uncorrected_aggregate = ask<unsigned long long>(a.total_ecc_errors, d, 1, 1);
    f.ecc_corrected_volatile = ask<unsigned long long>(a.total_ecc_errors, d, 0, 0);
    unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
    if (a.remapped_rows && a.remapped_rows(d, &corrected, &uncorrected, &pending, &failure) == kNvmlSuccess) {
      f.remapped_corrected = corrected;
      f.remapped_uncorrected = uncorrected;
      f.remap_pending = pending != 0;
      f.remap_failure = failure != 0;
    }
    f.clock_event_reasons = ask<unsigned long long>(a.clock_event_reasons, d);
    f.pcie_gen = ask<unsigned>(a.pcie_gen, d);
    f.pcie_gen_max = ask<unsigned>(a.pcie_gen_max, d);
    f.pcie_width = ask<unsigned>(a.pcie_width, d);
    f.pcie_width_max = ask<unsigned>(a.pcie_width_max, d);
    unsigned total = 0, active = 0;
    for (unsigned link = 0; a.nvlink_state && link < kNvlinkMaxLinks; ++link) {
      int state = 0;
      if (a.nvlink_state(d, link, &state) != kNvmlSuccess) continue;  // no such link on this GPU
      ++total;
      active += state == 1 ? 1 : 0;
    }
    if (total > 0) {
      f.nvlinks_total = total;
      f.nvlinks_active = active;
    }
    f.temperature_c = ask<unsigned>(a.temperature, d, 0);
    f.slowdown_temperature_c = ask<unsigned>(a.temperature_threshold, d, 1);
    f.power_mw = ask<unsigned>(a.power_usage, d);
    f.power_limit_mw = ask<unsigned>(a.power_limit, d);
    f.power_default_limit_mw = ask<unsigned>(a.power_default_limit, d);
    f.retired_pages_single_bit = retired_pages(a, d, kNvmlRetiredPagesSingleBit);
    f.retired_pages_double_bit = retired_pages(a, d, kNvmlRetiredPagesDoubleBit);
    if (const auto pending = ask<int>(a.retired_pages_pending, d)) f.retired_pages_pending = *pending != 0;
    f.pcie_replays = ask<unsigned>(a.pcie_replay_counter, d);
    f.xids_readable = kernel_log_readable;
    if (!f.pci_bus_id.empty()) f.xids = xids_for(kernel_log, f.pci_bus_id);
    gpus.push_back(f);
  }
  return gpus;
}

}  // namespace ddx::gpu
