#include "health/level1_gpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "ddx/text/text.h"
#include "gpu/gpu_checks.h"
#include "health/level1_rows.h"

namespace ddx::health {
namespace {

std::string device_of(const gpu::GpuFacts& g) { return "gpu" + std::to_string(g.index); }

std::string who(const gpu::GpuFacts& g) {
  return (g.name.empty() ? "GPU" : g.name) + " #" + std::to_string(g.index);
}

// The drain reason of each gpu-health check, after the GPU's name.
std::string reason_of(const std::string& check) {
  static const std::map<std::string, std::string> reasons = {
      {"ecc", "uncorrected ECC errors"}, {"row remapping", "row remapping"}, {"clocks", "clocks held down"},
      {"pcie", "PCIe link degraded"},    {"nvlink", "NVLink down"},         {"temperature", "too hot"},
      {"power", "power capped"}};
  const auto r = reasons.find(check);
  return r == reasons.end() ? check : r->second;
}

std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Check judge_retired_pages(const gpu::GpuFacts& g) {
  const std::string name = device_of(g) + " retired pages";
  if (!g.retired_pages_single_bit && !g.retired_pages_double_bit && !g.retired_pages_pending) {
    return skipped_check(name, who(g) + ": page retirement not supported (Ampere and later remap rows instead)");
  }
  const unsigned single = g.retired_pages_single_bit.value_or(0), dbl = g.retired_pages_double_bit.value_or(0);
  const unsigned total = single + dbl;
  const bool pending = g.retired_pages_pending.value_or(false);
  std::string value = who(g) + printf_text(": %u pages retired (%u after single-bit, %u after double-bit errors)",
                                           total, single, dbl) +
                      (pending ? ", a retirement pending" : ", none pending");
  Check check;
  if (total >= kRetiredPagesLimit) {
    check = make_check(name, State::Critical, value + printf_text(": at DCGM's limit of %u", kRetiredPagesLimit),
                       "replace the GPU (RMA): NVIDIA's field diagnostic fails a GPU with this many retired pages",
                       device_of(g) + printf_text(" %u retired pages", total));
  } else if (dbl > kRetiredDoubleBitSoftLimit) {
    check = make_check(name, State::Warn,
                       value + printf_text(": over %u after double-bit errors", kRetiredDoubleBitSoftLimit),
                       "watch it: DCGM fails a GPU past this count that retires one more page within a week",
                       device_of(g) + " retired pages (double-bit)");
  } else if (pending) {
    check = make_check(name, State::Warn, value,
                       "reset the GPU (nvidia-smi -r) or reboot when idle: until then the bad page stays in use",
                       device_of(g) + " page retirement pending");
  } else {
    check = make_check(name, State::Ok, value);
  }
  for (const auto& [cause, count] : {std::pair<const char*, unsigned>{"single_bit", single}, {"double_bit", dbl}}) {
    check.metrics.push_back(
        {"ddx_health_gpu_retired_pages", static_cast<double>(count), {{"device", device_of(g)}, {"cause", cause}}, false});
  }
  return check;
}

Check judge_pcie_replays(const gpu::GpuFacts& g, double uptime_s) {
  const std::string name = device_of(g) + " pcie replays";
  if (!g.pcie_replays) return skipped_check(name, who(g) + ": PCIe replay counter not readable");
  const double minutes = std::max(uptime_s / 60, 1.0);
  const double per_minute = *g.pcie_replays / minutes;
  const std::string value =
      who(g) + printf_text(": %u replays since the driver loaded, %.3g per minute averaged over %.0f minutes up",
                           *g.pcie_replays, per_minute, minutes);
  Check check =
      per_minute > kPcieReplaysPerMinute
          ? make_check(name, State::Warn, value + printf_text(" (over DCGM's %.0f per minute)", kPcieReplaysPerMinute),
                       "the link retransmits packets: reseat the GPU or riser, check the slot and cable (lspci -vv: "
                       "LnkSta, AER counters) and watch the count",
                       device_of(g) + " PCIe replays")
          : make_check(name, State::Ok, value);
  check.metrics.push_back(
      {"ddx_health_gpu_pcie_replays", static_cast<double>(*g.pcie_replays), {{"device", device_of(g)}}, false});
  return check;
}

std::vector<Check> nvml_gpu_rows(const gpu::GpuFacts& g, double uptime_s) {
  std::vector<Check> rows;
  const std::string prefix = g.host + " " + device_of(g) + " ";  // gpu-health's names: "<host> gpu<i> <check>"
  for (const doctor::CheckRow& row : gpu::check_gpus({g})) {
    const std::string check = row.name.rfind(prefix, 0) == 0 ? row.name.substr(prefix.size()) : row.name;
    if (check == "xid") continue;
    Check health_row = from_doctor_row(row, device_of(g) + " " + check, device_of(g) + " " + reason_of(check));
    if (check == "ecc" && g.ecc_uncorrected_volatile) {
      health_row.metrics.push_back({"ddx_health_gpu_ecc_uncorrected_errors", static_cast<double>(*g.ecc_uncorrected_volatile),
                                    {{"device", device_of(g)}, {"counter", "volatile"}}, false});
    }
    if (check == "temperature" && g.temperature_c) {
      health_row.metrics.push_back(
          {"ddx_health_gpu_temperature_celsius", static_cast<double>(*g.temperature_c), {{"device", device_of(g)}}, false});
    }
    rows.push_back(health_row);
  }
  rows.push_back(judge_retired_pages(g));
  rows.push_back(judge_pcie_replays(g, uptime_s));
  return rows;
}

int nvidia_gpus_on_pci_bus(const std::string& sysfs_root) {
  int gpus = 0;
  std::error_code error;
  for (const auto& device : std::filesystem::directory_iterator(sysfs_root + "/bus/pci/devices", error)) {
    if (read_line(device.path() / "vendor") == "0x10de" && read_line(device.path() / "class").rfind("0x03", 0) == 0) {
      ++gpus;
    }
  }
  return gpus;
}

Check gpu_count_check(int nvml_gpus, int pci_gpus, const std::string& nvml_error, const std::string& driver) {
  const std::string on_bus = printf_text("%d NVIDIA GPU%s on the PCI bus", pci_gpus, pci_gpus == 1 ? "" : "s");
  Check check;
  if (!nvml_error.empty() && pci_gpus == 0) {
    check = skipped_check("gpus", "no NVIDIA GPU: " + nvml_error);
  } else if (!nvml_error.empty()) {
    check = make_check("gpus", State::Critical, on_bus + ", but NVML cannot be used: " + nvml_error,
                       "load the NVIDIA driver (nvidia-smi says why not; reboot after a driver update)",
                       "NVIDIA driver not working");
  } else if (nvml_gpus < pci_gpus) {
    check = make_check("gpus", State::Critical, printf_text("NVML sees %d of the ", nvml_gpus) + on_bus,
                       "a GPU the driver lost (XID 79?): reboot; reseat or replace it if it stays missing",
                       printf_text("GPU missing (%d of %d)", nvml_gpus, pci_gpus));
  } else if (nvml_gpus == 0) {
    check = skipped_check("gpus", "no GPU: NVML sees none");
  } else {
    check = make_check("gpus", State::Ok, printf_text("%d GPU%s, driver %s", nvml_gpus, nvml_gpus == 1 ? "" : "s",
                                                      driver.empty() ? "unknown" : driver.c_str()));
  }
  if (nvml_error.empty()) check.metrics.push_back({"ddx_health_gpus", static_cast<double>(nvml_gpus), {}, false});
  return check;
}

}  // namespace ddx::health
