#pragma once
// Level 1's reading of the kernel log since boot: the XIDs of each GPU (the NVIDIA driver's error
// reports), judged by what each code means, and the CPU and memory machine checks (mce, EDAC,
// APEI). Pure functions of the lines, so the tests feed planted lines; the thresholds, the
// whitelist and why: docs/health.md. No LibTorch.
#include <string>
#include <vector>

#include "gpu/gpu_facts.h"
#include "health/health_check.h"

namespace ddx::health {

// What an XID code says about the GPU. Harmless: caused by an application (an illegal address, an
// engine exception, a channel torn down when a process is killed), the whitelist; Warn: degraded
// but working (a remapped row, a high single-bit ECC rate, a contained ECC error) or not a code
// ddx knows; Critical: the GPU cannot be trusted until reset or replaced.
enum class XidSeverity { Harmless, Warn, Critical };
XidSeverity xid_severity(int code);
// The whitelisted codes, in order: 13, 31, 43, 45.
const std::vector<int>& harmless_xids();

// A kernel log line about a machine check: None for every other line. Uncorrected: an EDAC "UE",
// an mce record whose status has the UC bit (61), an APEI event of fatal or recoverable severity,
// a memory page taken offline by the kernel (Memory failure); Corrected: an EDAC "CE", an mce
// record without UC, "Machine check events logged", an APEI event of corrected severity.
enum class MachineCheck { None, Corrected, Uncorrected };
MachineCheck classify_machine_check(const std::string& line);

// The rows: "gpu<i> xid" for each GPU (by its PCI bus id), "xid <device>" for each device the log
// names that is not among `gpus` (a GPU NVML no longer lists), and "machine checks". When the log
// could not be read the machine checks row is WARN with how to make it readable and the xid rows
// are skipped.
std::vector<Check> kernel_log_checks(const std::vector<std::string>& lines, bool readable,
                                     const std::vector<gpu::GpuFacts>& gpus);

}  // namespace ddx::health
