#pragma once
// Level 1's GPU rows: every GPU's NVML health as `ddx probe gpu-health` judges it (ECC, row
// remapping, clocks, PCIe width and generation, NVLink, temperature, power; gpu_checks.h), plus
// what a daily node check adds: retired pages and PCIe replays, and whether the driver sees every
// NVIDIA GPU on the PCI bus. Pure functions of the facts except the sysfs count. No LibTorch.
#include <string>
#include <vector>

#include "gpu/gpu_facts.h"
#include "health/health_check.h"

namespace ddx::health {

// DCGM's limits (dcgm_gpu_hardware_limits.h): 63 retired pages in all (NVIDIA's field diagnostic
// fails a GPU there; CRITICAL), more than 15 after double-bit errors (DCGM fails a GPU that then
// retires one more within a week; with no history, WARN); a retirement pending a reset: WARN.
inline constexpr unsigned kRetiredPagesLimit = 63, kRetiredDoubleBitSoftLimit = 15;
// DCGM's PCIe replay limit, "8 replays per minute is the maximum recommended" by the driver team.
// NVML's counter runs since the driver loaded; averaged over the uptime it is a lower bound on the
// rate since then (WARN above it). Prometheus' rate() of ddx_health_gpu_pcie_replays gives the
// recent rate.
inline constexpr double kPcieReplaysPerMinute = 8;

Check judge_retired_pages(const gpu::GpuFacts& gpu);
Check judge_pcie_replays(const gpu::GpuFacts& gpu, double uptime_s);

// One GPU's rows, named "gpu<index> <check>": gpu-health's (all but its xid row: the kernel log
// section judges XIDs with the whitelist), then retired pages and PCIe replays.
std::vector<Check> nvml_gpu_rows(const gpu::GpuFacts& gpu, double uptime_s);

// NVIDIA GPUs (vendor 0x10de, display class 0x03) under <sysfs_root>/bus/pci/devices.
int nvidia_gpus_on_pci_bus(const std::string& sysfs_root);

// The "gpus" row: how many GPUs NVML sees (`nvml_error` non-empty: NVML could not be used, and
// why) against the NVIDIA GPUs on the PCI bus. No NVML and no NVIDIA GPU: skipped (a CPU node);
// NVML missing or short of the GPUs on the bus: CRITICAL (a driver not loaded, a GPU lost).
Check gpu_count_check(int nvml_gpus, int pci_gpus, const std::string& nvml_error, const std::string& driver);

}  // namespace ddx::health
