#pragma once
// NVML, the NVIDIA driver's management library, loaded at run time with dlopen: ddx never links
// it, so one binary runs on machines without a driver (whoever asked says why not). Only the
// documented C entry points ddx reads are declared (NVML API reference); their types are the
// API's plain integers, handles and small structs, so no nvml.h is needed to build. Users:
// `ddx top` (utilisation, memory, power, processes), `ddx probe gpu-health` (ECC, remapping,
// throttling, PCIe, NVLink, temperature, power) and `ddx health` (also retired pages and PCIe
// replays). An entry point an older driver lacks is null, and its reader says so; only the core
// ones are required. DDX_NVML_LIBRARY names another library file (a driver outside the loader's
// path, or the tests' fake NVML).
#include <memory>
#include <string>

namespace ddx {

using nvmlReturn = int;          // nvmlReturn_t: 0 NVML_SUCCESS
using nvmlDevice = struct nvmlDevice_st*;

constexpr nvmlReturn kNvmlSuccess = 0;
constexpr nvmlReturn kNvmlInsufficientSize = 7;

struct nvmlPciInfo {  // nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3)
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};
struct nvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};
struct nvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

struct NvmlApi {
  // Required.
  nvmlReturn (*init)();                                          // nvmlInit_v2
  nvmlReturn (*shutdown)();                                      // nvmlShutdown
  const char* (*error_string)(nvmlReturn);                       // nvmlErrorString
  nvmlReturn (*device_count)(unsigned int*);                     // nvmlDeviceGetCount_v2
  nvmlReturn (*handle_by_index)(unsigned int, nvmlDevice*);      // nvmlDeviceGetHandleByIndex_v2
  nvmlReturn (*name)(nvmlDevice, char*, unsigned int);           // nvmlDeviceGetName
  // Optional: null when this driver's NVML lacks them.
  nvmlReturn (*system_driver_version)(char*, unsigned int);      // nvmlSystemGetDriverVersion
  nvmlReturn (*uuid)(nvmlDevice, char*, unsigned int);           // nvmlDeviceGetUUID
  nvmlReturn (*pci_info)(nvmlDevice, nvmlPciInfo*);              // nvmlDeviceGetPciInfo_v3
  nvmlReturn (*utilization)(nvmlDevice, nvmlUtilization*);       // nvmlDeviceGetUtilizationRates
  nvmlReturn (*memory_info)(nvmlDevice, nvmlMemory*);            // nvmlDeviceGetMemoryInfo
  nvmlReturn (*processes)(nvmlDevice, unsigned int*, void*);     // nvmlDeviceGetComputeRunningProcesses_v3
  // (device, error type 0 corrected / 1 uncorrected, counter 0 volatile / 1 aggregate, count)
  nvmlReturn (*total_ecc_errors)(nvmlDevice, int, int, unsigned long long*);  // nvmlDeviceGetTotalEccErrors
  // (device, corrected rows, uncorrected rows, remap pending, remap failure occurred)
  nvmlReturn (*remapped_rows)(nvmlDevice, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
  nvmlReturn (*clock_event_reasons)(nvmlDevice, unsigned long long*);  // ...CurrentClocksEventReasons
  nvmlReturn (*pcie_gen)(nvmlDevice, unsigned int*);             // nvmlDeviceGetCurrPcieLinkGeneration
  nvmlReturn (*pcie_gen_max)(nvmlDevice, unsigned int*);         // nvmlDeviceGetMaxPcieLinkGeneration
  nvmlReturn (*pcie_width)(nvmlDevice, unsigned int*);           // nvmlDeviceGetCurrPcieLinkWidth
  nvmlReturn (*pcie_width_max)(nvmlDevice, unsigned int*);       // nvmlDeviceGetMaxPcieLinkWidth
  nvmlReturn (*nvlink_state)(nvmlDevice, unsigned int, int*);    // nvmlDeviceGetNvLinkState (1 active)
  nvmlReturn (*temperature)(nvmlDevice, int, unsigned int*);     // nvmlDeviceGetTemperature (0: GPU)
  nvmlReturn (*temperature_threshold)(nvmlDevice, int, unsigned int*);  // ...Threshold (1: slowdown)
  nvmlReturn (*power_usage)(nvmlDevice, unsigned int*);          // nvmlDeviceGetPowerUsage (mW)
  nvmlReturn (*power_limit)(nvmlDevice, unsigned int*);          // nvmlDeviceGetEnforcedPowerLimit (mW)
  nvmlReturn (*power_default_limit)(nvmlDevice, unsigned int*);  // nvmlDeviceGetPowerManagementDefaultLimit
  // (device, cause, count in/out, addresses): count 0 and no buffer asks how many pages were retired
  // for `cause` (kNvmlRetiredPagesSingleBit / ...DoubleBit); NVML_ERROR_INSUFFICIENT_SIZE when some were.
  nvmlReturn (*retired_pages)(nvmlDevice, int, unsigned int*, unsigned long long*);  // nvmlDeviceGetRetiredPages
  nvmlReturn (*retired_pages_pending)(nvmlDevice, int*);         // ...RetiredPagesPendingStatus (1 pending)
  nvmlReturn (*pcie_replay_counter)(nvmlDevice, unsigned int*);  // nvmlDeviceGetPcieReplayCounter
};

// nvmlPageRetirementCause_t: pages retired after two single-bit errors at one address, or one double-bit error.
constexpr int kNvmlRetiredPagesSingleBit = 0, kNvmlRetiredPagesDoubleBit = 1;

// Clock event (throttle) reasons, nvmlClocksEventReason*.
constexpr unsigned long long kClocksIdle = 0x1, kClocksAppSetting = 0x2, kClocksSwPowerCap = 0x4,
                             kClocksHwSlowdown = 0x8, kClocksSyncBoost = 0x10, kClocksSwThermal = 0x20,
                             kClocksHwThermal = 0x40, kClocksHwPowerBrake = 0x80;
constexpr unsigned int kNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

// A loaded and initialised NVML; shut down and unloaded on destruction.
class Nvml {
 public:
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  const NvmlApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  std::string error(nvmlReturn r) const;

  // The library (DDX_NVML_LIBRARY, else libnvidia-ml.so.1), or null with `why` saying what
  // failed: "no NVIDIA driver (...)", a missing core entry point, or nvmlInit's error.
  static std::unique_ptr<Nvml> load(std::string& why);

 private:
  Nvml() = default;
  void* handle_ = nullptr;
  NvmlApi api_{};
  std::string path_;
};

}  // namespace ddx
