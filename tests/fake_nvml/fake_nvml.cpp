// A fake NVML for the GPU health tests (CI has no GPU and no driver): the entry points ddx's
// loader binds (runtime/include/ddx/nvml.h), answering for four H100-like GPUs. It answers each
// argument as NVML does, so a reader that asks for the wrong one gets a different number: ECC
// counts per error type (0 corrected, 1 uncorrected) x counter (0 volatile: since the driver
// loaded, 1 aggregate: lifetime), every temperature threshold type its own value, each NVLink its
// own state, the four remapped-row outputs distinct. Which faults it plants comes from
// FAKE_NVML_SCENARIO:
//   healthy      every GPU fine (idle, gen 5 x16, 18 NVLinks up, 40 C, 700 W limit; 3 corrected
//                ECC errors since the driver loaded and 12 over its lifetime, no uncorrected;
//                1 row remapped after a corrected error; 2 pages retired after single-bit errors,
//                none after double-bit ones, none pending; 3 PCIe replays)
//   faults       a different case on each GPU:
//                GPU 0  0 uncorrected ECC errors since the driver loaded, 4 over its lifetime
//                       (WARN), and 84 C with slowdown at 87 C (WARN; shutdown at 92, the GPU's
//                       max operating temperature 83: a reader of the wrong threshold gets PASS
//                       or FAIL); 50 pages retired after single-bit and 16 after double-bit
//                       errors (66: ddx health CRITICAL)
//                GPU 1  held down by hardware slowdown (FAIL) and a row remapping pending (WARN);
//                       a page retirement pending (ddx health WARN)
//                GPU 2  PCIe link at x8 of x16 (FAIL) and NVLink 7 of its 18 down (FAIL);
//                       3,000,000,000 PCIe replays (ddx health WARN at any uptime below 700 years)
//                GPU 3  2 uncorrected ECC errors since the driver loaded, 6 over its lifetime (FAIL);
//                       1 page retired after a single-bit and 16 after double-bit errors (ddx
//                       health WARN: a reader of the swapped causes gets 16 single-bit, OK)
//                (`ddx probe gpu-health` reads no retired pages or replays: its rows stay as above.)
//   init-fails   nvmlInit returns NVML_ERROR_DRIVER_NOT_LOADED (9)
// Built as a shared library and loaded through DDX_NVML_LIBRARY, exactly as the real one.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kInsufficientSize = 7, kDriverNotLoaded = 9;
constexpr unsigned kGpus = 4, kNvlinks = 18;

std::string scenario() {
  const char* s = std::getenv("FAKE_NVML_SCENARIO");
  return s ? s : "healthy";
}
bool faults() { return scenario() == "faults"; }

// A device handle is its index + 1 (never null).
unsigned index_of(void* device) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(device) - 1); }

// What one GPU holds, for the entry points whose arguments pick among several values.
struct Planted {
  unsigned long long ecc[2][2];  // [error type: 0 corrected, 1 uncorrected][counter: 0 volatile, 1 aggregate]
  unsigned remapped[4];          // corrected rows, uncorrected rows, pending, failure occurred
  int nvlink_down;               // a link that is down, or -1
  unsigned temperature;          // NVML_TEMPERATURE_GPU (sensor 0)
  unsigned retired[2];           // pages retired per nvmlPageRetirementCause_t: 0 two single-bit, 1 double-bit
  int retirement_pending;        // nvmlEnableState_t
  unsigned pcie_replays;
};

Planted planted(unsigned gpu) {
  Planted p{{{3, 12}, {0, 0}}, {1, 0, 0, 0}, -1, 40, {2, 0}, 0, 3};
  if (!faults()) return p;
  if (gpu == 0) {
    p.ecc[1][1] = 4;
    p.temperature = 84;
    p.retired[0] = 50;
    p.retired[1] = 16;
  }
  if (gpu == 1) {
    p.remapped[2] = 1;
    p.retirement_pending = 1;
  }
  if (gpu == 2) {
    p.nvlink_down = 7;
    p.pcie_replays = 3000000000u;
  }
  if (gpu == 3) {
    p.ecc[1][0] = 2;
    p.ecc[1][1] = 6;
    p.retired[0] = 1;
    p.retired[1] = 16;
  }
  return p;
}

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return scenario() == "init-fails" ? kDriverNotLoaded : kSuccess; }
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int r) { return r == kDriverNotLoaded ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char* out, unsigned n) {
  std::snprintf(out, n, "%s", "580.65.06-fake");
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = kGpus;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** device) {
  if (i >= kGpus) return kInvalidArgument;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(i) + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void*, char* out, unsigned n) {
  std::snprintf(out, n, "%s", "NVIDIA H100 80GB HBM3 (fake)");
  return kSuccess;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned n) {
  std::snprintf(out, n, "GPU-fake-%u", index_of(d));
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", 0x18 + 0x10 * index_of(d));
  return kSuccess;
}
// (device, nvmlMemoryErrorType_t: 0 corrected / 1 uncorrected, nvmlEccCounterType_t: 0 volatile / 1 aggregate)
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* n) {
  if (type < 0 || type > 1 || counter < 0 || counter > 1) return kInvalidArgument;
  *n = planted(index_of(d)).ecc[type][counter];
  return kSuccess;
}
int nvmlDeviceGetRemappedRows(void* d, unsigned* corrected, unsigned* uncorrected, unsigned* pending, unsigned* failure) {
  const Planted p = planted(index_of(d));
  *corrected = p.remapped[0];
  *uncorrected = p.remapped[1];
  *pending = p.remapped[2];
  *failure = p.remapped[3];
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* reasons) {
  *reasons = (faults() && index_of(d) == 1) ? 0x8 /* hardware slowdown */ : 0x1 /* idle */;
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void*, unsigned* g) {
  *g = 5;
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void*, unsigned* g) {
  *g = 5;
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* w) {
  *w = (faults() && index_of(d) == 2) ? 8 : 16;
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkWidth(void*, unsigned* w) {
  *w = 16;
  return kSuccess;
}
// (device, link, nvmlEnableState_t: 1 active, 0 not)
int nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
  if (link >= kNvlinks) return kInvalidArgument;
  *active = static_cast<int>(link) == planted(index_of(d)).nvlink_down ? 0 : 1;
  return kSuccess;
}
// (device, nvmlTemperatureSensors_t: 0 the GPU die, the only sensor)
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned* t) {
  if (sensor != 0) return kInvalidArgument;
  *t = planted(index_of(d)).temperature;
  return kSuccess;
}
// (device, nvmlTemperatureThresholds_t: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max operating)
int nvmlDeviceGetTemperatureThreshold(void*, int type, unsigned* t) {
  static const unsigned by_type[] = {92, 87, 95, 83};
  if (type < 0 || type > 3) return kNotSupported;
  *t = by_type[type];
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  *mw = 72000;
  return kSuccess;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 700000;
  return kSuccess;
}
int nvmlDeviceGetPowerManagementDefaultLimit(void*, unsigned* mw) {
  *mw = 700000;
  return kSuccess;
}

// (device, nvmlPageRetirementCause_t, count in/out, addresses): as NVML, a count too small for
// the pages (0 with no buffer: the question "how many?") is answered with the count and
// NVML_ERROR_INSUFFICIENT_SIZE.
int nvmlDeviceGetRetiredPages(void* d, int cause, unsigned* count, unsigned long long* addresses) {
  if (cause < 0 || cause > 1 || !count) return kInvalidArgument;
  const unsigned pages = planted(index_of(d)).retired[cause];
  if (*count < pages || !addresses) {
    const bool enough = *count >= pages;
    *count = pages;
    return enough ? kSuccess : kInsufficientSize;
  }
  for (unsigned i = 0; i < pages; ++i) addresses[i] = 0x1000ULL * (i + 1);
  *count = pages;
  return kSuccess;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* d, int* pending) {
  *pending = planted(index_of(d)).retirement_pending;
  return kSuccess;
}
int nvmlDeviceGetPcieReplayCounter(void* d, unsigned* replays) {
  *replays = planted(index_of(d)).pcie_replays;
  return kSuccess;
}

}  // extern "C"
