// A fake NVML for the GPU health tests (CI has no GPU and no driver): the entry points ddx's
// loader binds (probes/gpu/nvml_library.h), answering for four H100-like GPUs. Which faults it
// plants comes from FAKE_NVML_SCENARIO:
//   healthy      every GPU fine (idle, gen 5 x16, 18 NVLinks up, 40 C, 700 W limit)
//   faults       GPU 1 held down by hardware slowdown, GPU 2's PCIe link at x8 of x16,
//                GPU 3 with 2 uncorrected ECC errors since the driver loaded
//   init-fails   nvmlInit returns NVML_ERROR_DRIVER_NOT_LOADED (9)
// Built as a shared library and loaded through DDX_NVML_LIBRARY, exactly as the real one.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kDriverNotLoaded = 9;
constexpr unsigned kGpus = 4;

std::string scenario() {
  const char* s = std::getenv("FAKE_NVML_SCENARIO");
  return s ? s : "healthy";
}
bool faults() { return scenario() == "faults"; }

// A device handle is its index + 1 (never null).
unsigned index_of(void* device) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(device) - 1); }

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
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* n) {
  *n = (faults() && index_of(d) == 3 && type == 1) ? 2 : 0;  // uncorrected, volatile and aggregate
  (void)counter;
  return kSuccess;
}
int nvmlDeviceGetRemappedRows(void*, unsigned* corrected, unsigned* uncorrected, unsigned* pending, unsigned* failure) {
  *corrected = *uncorrected = *pending = *failure = 0;
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
int nvmlDeviceGetNvLinkState(void*, unsigned link, int* active) {
  if (link >= 18) return kInvalidArgument;
  *active = 1;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void*, int, unsigned* t) {
  *t = 40;
  return kSuccess;
}
int nvmlDeviceGetTemperatureThreshold(void*, int, unsigned* t) {
  *t = 87;
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

}  // extern "C"
