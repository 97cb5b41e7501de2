#include "gpu/gpu_checks.h"

#include "ddx/text/text.h"
#include "ddx/nvml.h"
#include "gpu/xid_log.h"

namespace ddx::gpu {
namespace {

using doctor::CheckRow;
using doctor::Status;

std::string who(const GpuFacts& g) {
  std::string s = g.name.empty() ? "GPU " + std::to_string(g.index) : g.name + " #" + std::to_string(g.index);
  if (g.rank >= 0) s += " (rank " + std::to_string(g.rank) + ")";
  return s;
}

CheckRow row(const GpuFacts& g, const std::string& check, Status status, const std::string& value,
             const std::string& fix = "") {
  return {g.host + " gpu" + std::to_string(g.index) + " " + check, status, who(g) + ": " + value, fix};
}

const char* kDrain = "drain the node, reset the GPU (nvidia-smi -r) and run dcgmi diag -r 3; replace it if this returns";

CheckRow ecc(const GpuFacts& g) {
  if (!g.ecc_uncorrected_volatile && !g.ecc_uncorrected_aggregate) return row(g, "ecc", Status::Skip, "ECC not supported or off");
  const unsigned long long now = g.ecc_uncorrected_volatile.value_or(0), ever = g.ecc_uncorrected_aggregate.value_or(0);
  if (now > 0) {
    return row(g, "ecc", Status::Fail, printf_text("%llu uncorrected ECC errors since the driver loaded", now), kDrain);
  }
  if (ever > 0) {
    return row(g, "ecc", Status::Warn, printf_text("%llu uncorrected ECC errors over its lifetime, none since the driver loaded", ever),
               "watch it: check the row remapping row and XIDs 48/94/95");
  }
  return row(g, "ecc", Status::Pass,
             printf_text("no uncorrected errors (%llu corrected since the driver loaded)", g.ecc_corrected_volatile.value_or(0)));
}

CheckRow remapping(const GpuFacts& g) {
  if (!g.remap_failure) return row(g, "row remapping", Status::Skip, "not supported (before Ampere, or no HBM)");
  if (*g.remap_failure) {
    return row(g, "row remapping", Status::Fail, "a row remapping failed: no spare rows left", "replace the GPU (RMA)");
  }
  if (g.remap_pending.value_or(false)) {
    return row(g, "row remapping", Status::Warn, "a remapping is pending", "reset the GPU (nvidia-smi -r) to apply it");
  }
  const std::string counts = printf_text("%u rows remapped after corrected, %u after uncorrected errors",
                                         g.remapped_corrected.value_or(0), g.remapped_uncorrected.value_or(0));
  if (g.remapped_uncorrected.value_or(0) > 0) return row(g, "row remapping", Status::Warn, counts, "watch it: spares run out");
  return row(g, "row remapping", Status::Pass, counts);
}

CheckRow clocks(const GpuFacts& g) {
  if (!g.clock_event_reasons) return row(g, "clocks", Status::Skip, "clock event reasons not readable");
  const unsigned long long r = *g.clock_event_reasons;
  std::vector<std::string> hard, soft, benign;
  if (r & kClocksHwSlowdown) hard.push_back("hardware slowdown");
  if (r & kClocksHwThermal) hard.push_back("hardware thermal slowdown");
  if (r & kClocksHwPowerBrake) hard.push_back("power brake (external power supply signal)");
  if (r & kClocksSwThermal) soft.push_back("software thermal slowdown");
  if (r & kClocksIdle) benign.push_back("idle");
  if (r & kClocksSwPowerCap) benign.push_back("at its power cap");
  if (r & kClocksAppSetting) benign.push_back("application clocks set");
  if (r & kClocksSyncBoost) benign.push_back("sync boost");
  if (!hard.empty()) {
    return row(g, "clocks", Status::Fail, "clocks held down: " + join(hard),
               "check cooling and power delivery of this GPU's slot (nvidia-smi -q -d PERFORMANCE)");
  }
  if (!soft.empty()) return row(g, "clocks", Status::Warn, "clocks held down: " + join(soft), "check the airflow and inlet temperature");
  return row(g, "clocks", Status::Pass, benign.empty() ? "not throttled" : "not throttled (" + join(benign) + ")");
}

CheckRow pcie(const GpuFacts& g) {
  if (!g.pcie_width || !g.pcie_width_max) return row(g, "pcie", Status::Skip, "PCIe link not readable");
  const std::string link = printf_text("gen %u x%u (max gen %u x%u)", g.pcie_gen.value_or(0), *g.pcie_width,
                                       g.pcie_gen_max.value_or(0), *g.pcie_width_max);
  if (*g.pcie_width < *g.pcie_width_max) {
    return row(g, "pcie", Status::Fail, link + ": the link trained narrower than the slot",
               "reseat the GPU or riser; check the slot and cable (lspci -vv: LnkSta vs LnkCap)");
  }
  const bool idle = g.clock_event_reasons && (*g.clock_event_reasons & kClocksIdle);
  if (g.pcie_gen && g.pcie_gen_max && *g.pcie_gen < *g.pcie_gen_max && !idle) {
    return row(g, "pcie", Status::Warn, link + ": below its generation while busy",
               "an idle GPU lowers its link speed to save power; under load this is a degraded link");
  }
  return row(g, "pcie", Status::Pass, link + (idle && g.pcie_gen < g.pcie_gen_max ? " (idle: a lower generation is normal)" : ""));
}

CheckRow nvlink(const GpuFacts& g) {
  if (!g.nvlinks_total) return row(g, "nvlink", Status::Skip, "no NVLink on this GPU");
  const std::string links = printf_text("%u of %u links up", g.nvlinks_active.value_or(0), *g.nvlinks_total);
  if (g.nvlinks_active.value_or(0) < *g.nvlinks_total) {
    return row(g, "nvlink", Status::Fail, links, "check the fabric manager and nvidia-smi nvlink -s; reset or replace");
  }
  return row(g, "nvlink", Status::Pass, links);
}

CheckRow temperature(const GpuFacts& g) {
  if (!g.temperature_c) return row(g, "temperature", Status::Skip, "not readable");
  const unsigned t = *g.temperature_c;
  if (g.slowdown_temperature_c) {
    const unsigned limit = *g.slowdown_temperature_c;
    const std::string v = printf_text("%u C (slows down at %u C)", t, limit);
    if (t >= limit) return row(g, "temperature", Status::Fail, v, "check the cooling: it is throttling");
    if (t + 5 >= limit) return row(g, "temperature", Status::Warn, v, "within 5 C of slowing down: check the airflow");
    return row(g, "temperature", Status::Pass, v);
  }
  return row(g, "temperature", t > 85 ? Status::Warn : Status::Pass, printf_text("%u C", t),
             t > 85 ? "hot for a data-centre GPU: check the airflow" : "");
}

CheckRow power(const GpuFacts& g) {
  if (!g.power_limit_mw) return row(g, "power", Status::Skip, "not readable");
  const std::string v = printf_text("%.0f W of a %.0f W limit", g.power_mw.value_or(0) / 1000.0, *g.power_limit_mw / 1000.0);
  if (g.power_default_limit_mw && *g.power_limit_mw < 0.95 * *g.power_default_limit_mw) {
    return row(g, "power", Status::Warn, v + printf_text(", capped below its default %.0f W", *g.power_default_limit_mw / 1000.0),
               "nvidia-smi -pl resets it; a cap lowers every figure of this GPU");
  }
  return row(g, "power", Status::Pass, v);
}

CheckRow xids(const GpuFacts& g) {
  if (!g.xids_readable) {
    return row(g, "xid", Status::Skip, "kernel log not readable", "run as root (or sysctl kernel.dmesg_restrict=0) to see XIDs");
  }
  if (g.xids.empty()) return row(g, "xid", Status::Pass, "no XID events since boot");
  std::vector<std::string> hardware, other;
  for (const auto& [code, n] : g.xids) {
    const std::string meaning = xid_meaning(code);
    (meaning.empty() ? other : hardware)
        .push_back(printf_text("%d x%d", code, n) + (meaning.empty() ? "" : " (" + meaning + ")"));
  }
  if (!hardware.empty()) return row(g, "xid", Status::Fail, "XIDs since boot: " + join(hardware), kDrain);
  return row(g, "xid", Status::Warn, "XIDs since boot: " + join(other),
             "look them up in NVIDIA's XID catalogue; most others are application errors");
}

}  // namespace

std::vector<CheckRow> check_gpus(const std::vector<GpuFacts>& gpus) {
  std::vector<CheckRow> rows;
  for (const GpuFacts& g : gpus) {
    for (const CheckRow& r : {ecc(g), remapping(g), clocks(g), pcie(g), nvlink(g), temperature(g), power(g), xids(g)}) {
      rows.push_back(r);
    }
  }
  return rows;
}

CheckRow no_nvml(const std::string& host, const std::string& why) {
  return {host + " gpu health", Status::Skip, why, "on a GPU node: install the NVIDIA driver, or set DDX_NVML_LIBRARY"};
}

}  // namespace ddx::gpu
