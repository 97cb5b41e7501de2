#include "ddx/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <type_traits>

namespace ddx {
namespace {

// The first of `symbols` the library has (newer versioned names first), or null.
template <typename Fn>
void bind(void* lib, Fn& fn, std::initializer_list<const char*> symbols) {
  fn = nullptr;
  for (const char* s : symbols) {
    if (void* p = ::dlsym(lib, s)) {
      fn = reinterpret_cast<Fn>(p);
      return;
    }
  }
}

}  // namespace

Nvml::~Nvml() {
  if (api_.shutdown) api_.shutdown();
  if (handle_) ::dlclose(handle_);
}

std::string Nvml::error(nvmlReturn r) const {
  const char* text = api_.error_string ? api_.error_string(r) : nullptr;
  return (text ? std::string(text) : "NVML error") + " (" + std::to_string(r) + ")";
}

std::unique_ptr<Nvml> Nvml::load(std::string& why) {
  const char* env = std::getenv("DDX_NVML_LIBRARY");
  const std::string path = env && *env ? env : "libnvidia-ml.so.1";
  std::unique_ptr<Nvml> nvml(new Nvml());
  nvml->path_ = path;
  nvml->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nvml->handle_) {
    const char* e = ::dlerror();
    why = "no NVIDIA driver (" + (e ? std::string(e) : "cannot load " + path) + ")";
    return nullptr;
  }
  void* lib = nvml->handle_;
  NvmlApi& a = nvml->api_;
  bind(lib, a.init, {"nvmlInit_v2", "nvmlInit"});
  bind(lib, a.shutdown, {"nvmlShutdown"});
  bind(lib, a.error_string, {"nvmlErrorString"});
  bind(lib, a.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  bind(lib, a.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  bind(lib, a.name, {"nvmlDeviceGetName"});
  if (!a.init || !a.shutdown || !a.error_string || !a.device_count || !a.handle_by_index || !a.name) {
    a.shutdown = nullptr;  // never initialised: nothing to shut down
    why = path + " lacks NVML's core entry points (nvmlInit, nvmlDeviceGetCount, ...): not NVML?";
    return nullptr;
  }
  bind(lib, a.system_driver_version, {"nvmlSystemGetDriverVersion"});
  bind(lib, a.uuid, {"nvmlDeviceGetUUID"});
  bind(lib, a.pci_info, {"nvmlDeviceGetPciInfo_v3"});
  bind(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"});
  bind(lib, a.memory_info, {"nvmlDeviceGetMemoryInfo"});
  bind(lib, a.processes, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                          "nvmlDeviceGetComputeRunningProcesses"});
  bind(lib, a.total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  bind(lib, a.remapped_rows, {"nvmlDeviceGetRemappedRows"});
  bind(lib, a.clock_event_reasons,
       {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  bind(lib, a.pcie_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  bind(lib, a.pcie_gen_max, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  bind(lib, a.pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  bind(lib, a.pcie_width_max, {"nvmlDeviceGetMaxPcieLinkWidth"});
  bind(lib, a.nvlink_state, {"nvmlDeviceGetNvLinkState"});
  bind(lib, a.temperature, {"nvmlDeviceGetTemperature"});
  bind(lib, a.temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"});
  bind(lib, a.power_usage, {"nvmlDeviceGetPowerUsage"});
  bind(lib, a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  bind(lib, a.power_default_limit, {"nvmlDeviceGetPowerManagementDefaultLimit"});
  bind(lib, a.retired_pages, {"nvmlDeviceGetRetiredPages"});
  bind(lib, a.retired_pages_pending, {"nvmlDeviceGetRetiredPagesPendingStatus"});
  bind(lib, a.pcie_replay_counter, {"nvmlDeviceGetPcieReplayCounter"});
  if (const nvmlReturn r = a.init(); r != kNvmlSuccess) {
    why = "nvmlInit failed: " + nvml->error(r) + " (is the driver loaded? nvidia-smi says more)";
    a.shutdown = nullptr;
    return nullptr;
  }
  return nvml;
}

}  // namespace ddx
