#include "top/node_stats.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ddx::top {
namespace {

// The few NVML entry points used, declared here so the build needs no nvml.h.
using nvmlReturn = int;
using nvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlApi {
  nvmlReturn (*init)();
  nvmlReturn (*shutdown)();
  const char* (*error_string)(nvmlReturn);
  nvmlReturn (*count)(unsigned int*);
  nvmlReturn (*handle)(unsigned int, nvmlDevice*);
  nvmlReturn (*name)(nvmlDevice, char*, unsigned int);
  nvmlReturn (*utilization)(nvmlDevice, NvmlUtilization*);
  nvmlReturn (*power)(nvmlDevice, unsigned int*);
  nvmlReturn (*power_limit)(nvmlDevice, unsigned int*);
  nvmlReturn (*memory)(nvmlDevice, NvmlMemory*);
  nvmlReturn (*processes)(nvmlDevice, unsigned int*, void*);
};
constexpr nvmlReturn kNvmlSuccess = 0;
constexpr nvmlReturn kNvmlInsufficientSize = 7;
NvmlApi g_api{};

template <typename F>
bool bind(void* lib, F& fn, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = ::dlsym(lib, n)) {
      fn = reinterpret_cast<F>(p);
      return true;
    }
  }
  return false;
}

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
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    error_ = std::string("no NVML: ") + (why ? why : "libnvidia-ml.so.1 not found");
    return;
  }
  NvmlApi a{};
  const bool ok = bind(lib, a.init, {"nvmlInit_v2", "nvmlInit"}) && bind(lib, a.shutdown, {"nvmlShutdown"}) &&
                  bind(lib, a.error_string, {"nvmlErrorString"}) &&
                  bind(lib, a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}) &&
                  bind(lib, a.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}) &&
                  bind(lib, a.name, {"nvmlDeviceGetName"}) &&
                  bind(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"}) &&
                  bind(lib, a.power, {"nvmlDeviceGetPowerUsage"}) &&
                  bind(lib, a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit"}) &&
                  bind(lib, a.memory, {"nvmlDeviceGetMemoryInfo"}) &&
                  bind(lib, a.processes, {"nvmlDeviceGetComputeRunningProcesses_v3",
                                          "nvmlDeviceGetComputeRunningProcesses_v2",
                                          "nvmlDeviceGetComputeRunningProcesses"});
  if (!ok) {
    error_ = "no NVML: libnvidia-ml.so.1 lacks an entry point ddx top needs";
    ::dlclose(lib);
    return;
  }
  if (nvmlReturn rc = a.init(); rc != kNvmlSuccess) {
    error_ = std::string("no NVML: nvmlInit failed: ") + a.error_string(rc);
    ::dlclose(lib);
    return;
  }
  g_api = a;
  handle_ = lib;
}

Nvml::~Nvml() {
  if (!handle_) return;
  g_api.shutdown();
  ::dlclose(handle_);
}

std::vector<GpuStats> Nvml::query(std::string& error) const {
  std::vector<GpuStats> out;
  if (!handle_) {
    error = error_;
    return out;
  }
  unsigned int count = 0;
  if (nvmlReturn rc = g_api.count(&count); rc != kNvmlSuccess) {
    error = std::string("nvmlDeviceGetCount: ") + g_api.error_string(rc);
    return {};
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice dev = nullptr;
    if (nvmlReturn rc = g_api.handle(i, &dev); rc != kNvmlSuccess) {
      error = "GPU " + std::to_string(i) + ": " + g_api.error_string(rc);
      continue;
    }
    GpuStats g;
    g.index = static_cast<int>(i);
    char name[96] = {0};
    if (g_api.name(dev, name, sizeof name) == kNvmlSuccess) g.name = name;
    NvmlUtilization u{};
    if (g_api.utilization(dev, &u) == kNvmlSuccess) g.util_pct = u.gpu;
    unsigned int mw = 0;
    if (g_api.power(dev, &mw) == kNvmlSuccess) g.power_w = mw / 1000.0;
    if (g_api.power_limit(dev, &mw) == kNvmlSuccess) g.power_limit_w = mw / 1000.0;
    NvmlMemory m{};
    if (g_api.memory(dev, &m) == kNvmlSuccess) {
      g.memory_used_bytes = static_cast<int64_t>(m.used);
      g.memory_total_bytes = static_cast<int64_t>(m.total);
    }
    // With no buffer NVML only counts: SUCCESS for none, INSUFFICIENT_SIZE with the count.
    unsigned int procs = 0;
    const nvmlReturn rc = g_api.processes(dev, &procs, nullptr);
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
