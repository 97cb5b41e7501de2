#include "health/throttle_watch.h"

#include <dirent.h>

#include <cstdio>
#include <fstream>
#include <tuple>

#include "ddx/nvml.h"
#include "ddx/text/text.h"
#include "gpu/gpu_checks.h"
#include "gpu/gpu_facts.h"

namespace ddx::health {
namespace {

// "0000:3b:00.0" (CUDA) and "00000000:3B:00.0" (NVML) name the same GPU.
std::tuple<unsigned, unsigned, unsigned, unsigned> bus_numbers(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return {~0u, ~0u, ~0u, ~0u};
  return {domain, bus, device, function};
}

State state_of(doctor::Status status) {
  switch (status) {
    case doctor::Status::Fail: return State::Critical;
    case doctor::Status::Warn: return State::Warn;
    default: return State::Ok;
  }
}

// The CPU number of "devices/system/cpu/cpu12/thermal_throttle/core_throttle_count".
std::string cpu_of(const std::string& counter) {
  const size_t at = counter.find("/cpu/cpu") + 8;
  return counter.substr(at, counter.find('/', at) - at);
}

}  // namespace

CpuThrottleCounts read_cpu_throttle_counts(const std::string& sysfs_root) {
  CpuThrottleCounts counts;
  const std::string cpus = sysfs_root + "/devices/system/cpu";
  DIR* dir = ::opendir(cpus.c_str());
  if (!dir) return counts;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() < 4 || name.rfind("cpu", 0) != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos) continue;
    for (const char* counter : {"core_throttle_count", "package_throttle_count"}) {
      const std::string relative = "devices/system/cpu/" + name + "/thermal_throttle/" + counter;
      std::ifstream in(sysfs_root + "/" + relative);
      uint64_t events = 0;
      if (in >> events) counts[relative] = events;
    }
  }
  ::closedir(dir);
  return counts;
}

Check judge_cpu_throttle(const CpuThrottleCounts& before, const CpuThrottleCounts& after) {
  Check c;
  c.name = "burn-in cpu throttle";
  if (after.empty()) {
    c.skipped = true;
    c.value = "no thermal throttle counters in /sys/devices/system/cpu/cpu*/thermal_throttle (a virtual machine?)";
    return c;
  }
  uint64_t core_events = 0, package_events = 0;
  std::vector<std::string> cpus;
  for (const auto& [counter, events] : after) {
    const auto was = before.find(counter);
    const uint64_t added = was == before.end() || events < was->second ? 0 : events - was->second;
    if (added == 0) continue;
    const bool core = counter.find("core_throttle_count") != std::string::npos;
    (core ? core_events : package_events) += added;
    if (core) cpus.push_back(cpu_of(counter));
  }
  if (core_events + package_events == 0) {
    c.value = printf_text("no thermal throttling under load (%zu counters read)", after.size());
    return c;
  }
  c.state = State::Warn;
  c.value = printf_text("thermal throttling under load: %llu core events%s%s, %llu package events",
                        static_cast<unsigned long long>(core_events), cpus.empty() ? "" : " on cpu ",
                        join(cpus, ",").c_str(), static_cast<unsigned long long>(package_events));
  c.reason = "cpu thermal throttling";
  c.remediation = "check the cooling (fans, heatsink seating, inlet temperature): a throttled CPU slows every rank on it";
  return c;
}

std::vector<Check> judge_gpu_under_load(const std::string& label, const gpu::GpuFacts& before, const gpu::GpuFacts& after,
                                        unsigned long long reasons_seen) {
  std::vector<Check> rows;
  // The clocks: every reason seen while loaded, judged as `ddx probe gpu-health` judges one reading.
  gpu::GpuFacts seen = after;
  seen.clock_event_reasons = reasons_seen;
  Check clocks;
  clocks.name = "burn-in " + label + " clocks";
  for (const doctor::CheckRow& row : gpu::check_gpus({seen})) {
    if (row.name.size() < 7 || row.name.compare(row.name.size() - 7, 7, " clocks") != 0) continue;
    clocks.state = state_of(row.status);
    clocks.skipped = row.status == doctor::Status::Skip;
    clocks.value = "under load: " + row.value;
    clocks.remediation = row.fix;
    if (clocks.state != State::Ok) clocks.reason = label + " throttled under load";
  }
  rows.push_back(clocks);

  Check ecc;
  ecc.name = "burn-in " + label + " ecc";
  if (!before.ecc_uncorrected_volatile || !after.ecc_uncorrected_volatile) {
    ecc.skipped = true;
    ecc.value = "ECC not supported or off";
  } else {
    const unsigned long long uncorrected = *after.ecc_uncorrected_volatile - std::min(*after.ecc_uncorrected_volatile, *before.ecc_uncorrected_volatile);
    const unsigned long long corrected =
        after.ecc_corrected_volatile.value_or(0) - std::min(after.ecc_corrected_volatile.value_or(0), before.ecc_corrected_volatile.value_or(0));
    if (uncorrected > 0) {
      ecc.state = State::Critical;
      ecc.value = printf_text("%llu uncorrected ECC errors during the burn-in", uncorrected);
      ecc.reason = label + " uncorrectable ECC under load";
      ecc.remediation = "drain the node, reset the GPU (nvidia-smi -r) and run dcgmi diag -r 3; replace it if this returns";
    } else if (corrected > 0) {
      ecc.state = State::Warn;
      ecc.value = printf_text("%llu corrected ECC errors during the burn-in", corrected);
      ecc.reason = label + " ECC errors under load";
      ecc.remediation = "watch it: corrected errors under load come before row remapping and uncorrected ones";
    } else {
      ecc.value = printf_text("no ECC errors during the burn-in (%llu corrected since the driver loaded)",
                              after.ecc_corrected_volatile.value_or(0));
    }
  }
  rows.push_back(ecc);
  return rows;
}

struct GpuWatch::Watched {
  std::string label;
  int nvml_index = -1;  // -1: NVML does not list this GPU's bus id
  gpu::GpuFacts before;
  unsigned long long reasons_seen = 0;
};

GpuWatch::GpuWatch(const std::vector<std::pair<std::string, std::string>>& gpus) {
  nvml_ = Nvml::load(why_no_nvml_);
  const std::vector<gpu::GpuFacts> all = nvml_ ? gpu::read_gpu_facts(*nvml_, "", -1, {}, false) : std::vector<gpu::GpuFacts>{};
  for (const auto& [label, bus_id] : gpus) {
    Watched w;
    w.label = label;
    for (const gpu::GpuFacts& f : all) {
      if (bus_numbers(f.pci_bus_id) != bus_numbers(bus_id)) continue;
      w.nvml_index = f.index;
      w.before = f;
    }
    gpus_.push_back(w);
  }
}

GpuWatch::~GpuWatch() = default;

void GpuWatch::sample() {
  if (!nvml_) return;
  for (Watched& w : gpus_) {
    if (w.nvml_index < 0) continue;
    for (const gpu::GpuFacts& f : gpu::read_gpu_facts(*nvml_, "", w.nvml_index, {}, false)) {
      w.reasons_seen |= f.clock_event_reasons.value_or(0);
    }
  }
}

std::vector<Check> GpuWatch::finish() {
  std::vector<Check> rows;
  if (!nvml_) {
    Check c;
    c.name = "burn-in gpu clocks and ecc";
    c.skipped = true;
    c.value = "NVML not loaded: " + why_no_nvml_;
    return {c};
  }
  sample();
  for (const Watched& w : gpus_) {
    if (w.nvml_index < 0) {
      Check c;
      c.name = "burn-in " + w.label + " clocks and ecc";
      c.state = State::Unknown;
      c.value = "NVML lists no GPU at this CUDA device's PCI bus id";
      c.remediation = "check CUDA_VISIBLE_DEVICES and nvidia-smi: ddx health could not watch this GPU";
      rows.push_back(c);
      continue;
    }
    const std::vector<gpu::GpuFacts> after = gpu::read_gpu_facts(*nvml_, "", w.nvml_index, {}, false);
    const std::vector<Check> judged = judge_gpu_under_load(w.label, w.before, after.empty() ? w.before : after.front(), w.reasons_seen);
    rows.insert(rows.end(), judged.begin(), judged.end());
  }
  return rows;
}

}  // namespace ddx::health
