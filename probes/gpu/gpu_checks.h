#pragma once
// The GPU health checks: each GPU's NVML facts judged as named PASS/WARN/FAIL/SKIP rows in the
// doctor's table format (doctor_checks.h), with a fix per problem. What each check looks at and
// why its limits are where they are: docs/gpu-health.md. No LibTorch, no NVML: unit-tested on
// planted facts.
#include <string>
#include <vector>

#include "doctor/doctor_checks.h"
#include "gpu/gpu_facts.h"

namespace ddx::gpu {

// Eight rows per GPU (ecc, row remapping, clocks, pcie, nvlink, temperature, power, xid), named
// "<host> gpu<index> <check>", the GPU's rank in the value when a rank read it.
std::vector<doctor::CheckRow> check_gpus(const std::vector<GpuFacts>& gpus);

// One SKIP row for a host without NVML (no driver): `why` is the loader's reason.
doctor::CheckRow no_nvml(const std::string& host, const std::string& why);

}  // namespace ddx::gpu
