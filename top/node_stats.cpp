#include "top/node_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ddx/nvml.h"

namespace ddx::top {
namespace {

int64_t meminfo_bytes(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + ":");
  if (at == std::string::npos) return 0;
  return std::atoll(text.c_str() + at + key.size() + 1) * 1024;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Nvml::Nvml() {
  std::string why;
  lib_ = ::ddx::Nvml::load(why);
  if (!lib_) error_ = "no NVML: " + why;
}

Nvml::~Nvml() = default;

std::vector<GpuStats> Nvml::query(std::string& error) const {
  std::vector<GpuStats> out;
  if (!lib_) {
    error = error_;
    return out;
  }
  const NvmlApi& api = lib_->api();
  unsigned int count = 0;
  if (nvmlReturn rc = api.device_count(&count); rc != kNvmlSuccess) {
    error = "nvmlDeviceGetCount: " + lib_->error(rc);
    return {};
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice dev = nullptr;
    if (nvmlReturn rc = api.handle_by_index(i, &dev); rc != kNvmlSuccess) {
      error = "GPU " + std::to_string(i) + ": " + lib_->error(rc);
      continue;
    }
    GpuStats g;
    g.index = static_cast<int>(i);
    char name[96] = {0};
    if (api.name(dev, name, sizeof name) == kNvmlSuccess) g.name = name;
    nvmlUtilization u{};
    if (api.utilization && api.utilization(dev, &u) == kNvmlSuccess) g.util_pct = u.gpu;
    unsigned int mw = 0;
    if (api.power_usage && api.power_usage(dev, &mw) == kNvmlSuccess) g.power_w = mw / 1000.0;
    if (api.power_limit && api.power_limit(dev, &mw) == kNvmlSuccess) g.power_limit_w = mw / 1000.0;
    nvmlMemory m{};
    if (api.memory_info && api.memory_info(dev, &m) == kNvmlSuccess) {
      g.memory_used_bytes = static_cast<int64_t>(m.used);
      g.memory_total_bytes = static_cast<int64_t>(m.total);
    }
    // With no buffer NVML only counts: SUCCESS for none, INSUFFICIENT_SIZE with the count.
    unsigned int procs = 0;
    const nvmlReturn rc = api.processes ? api.processes(dev, &procs, nullptr) : -1;
    if (rc == kNvmlSuccess || rc == kNvmlInsufficientSize) g.processes = static_cast<int>(procs);
    out.push_back(g);
  }
  return out;
}

std::string local_hostname() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

NodeView local_node(const Nvml& nvml, const std::vector<int>& pids) {
  NodeView n;
  n.host = local_hostname();
  n.source = nvml.available() ? "nvml" : "proc";
  std::string error;
  n.gpus = nvml.query(error);
  n.gpu_note = error;
  if (nvml.available()) {
    n.gpu_processes = 0;
    for (const GpuStats& g : n.gpus) n.gpu_processes += std::max(0, g.processes);
  }
  std::ifstream loadavg("/proc/loadavg");
  loadavg >> n.load1;
  if (!loadavg) n.load1 = -1;
  n.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  const std::string meminfo = read_text("/proc/meminfo");
  n.memory_total_bytes = meminfo_bytes(meminfo, "MemTotal");
  n.memory_available_bytes = meminfo_bytes(meminfo, "MemAvailable");
  n.ranks = static_cast<int>(pids.size());
  n.processes = 0;
  for (int pid : pids) {
    const std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
    if (status.empty() || status.find("State:\tZ") != std::string::npos) continue;
    ++n.processes;
    n.rss_bytes += meminfo_bytes(status, "VmRSS");
  }
  return n;
}

}  // namespace ddx::top
