// The GPU health checks (probes/gpu/gpu_checks.h) on planted NVML facts, and the XID log parser.
#include <gtest/gtest.h>

#include "gpu/gpu_checks.h"
#include "gpu/xid_log.h"

namespace ddx::gpu {
namespace {

using doctor::Status;

GpuFacts healthy(int index) {
  GpuFacts g;
  g.index = index;
  g.host = "node7";
  g.name = "NVIDIA H100 80GB HBM3";
  g.ecc_uncorrected_volatile = 0;
  g.ecc_uncorrected_aggregate = 0;
  g.ecc_corrected_volatile = 3;
  g.remapped_corrected = 0;
  g.remapped_uncorrected = 0;
  g.remap_pending = false;
  g.remap_failure = false;
  g.clock_event_reasons = 0x1;  // idle
  g.pcie_gen = 5;
  g.pcie_gen_max = 5;
  g.pcie_width = 16;
  g.pcie_width_max = 16;
  g.nvlinks_total = 18;
  g.nvlinks_active = 18;
  g.temperature_c = 35;
  g.slowdown_temperature_c = 87;
  g.power_mw = 70000;
  g.power_limit_mw = 700000;
  g.power_default_limit_mw = 700000;
  g.xids_readable = true;
  return g;
}

Status status_of(const std::vector<doctor::CheckRow>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return r.status;
  }
  ADD_FAILURE() << "no row " << name;
  return Status::Skip;
}

TEST(GpuChecks, AHealthyGpuPassesEveryCheck) {
  const auto rows = check_gpus({healthy(0)});
  ASSERT_EQ(rows.size(), 8u);
  for (const auto& r : rows) EXPECT_EQ(r.status, Status::Pass) << r.name << ": " << r.value;
  EXPECT_EQ(doctor::exit_code(rows), 0);
}

TEST(GpuChecks, EachPlantedFaultFailsItsOwnCheckOnItsOwnGpu) {
  std::vector<GpuFacts> gpus = {healthy(0), healthy(1), healthy(2), healthy(3), healthy(4), healthy(5)};
  gpus[1].clock_event_reasons = 0x8;  // hardware slowdown
  gpus[2].pcie_width = 8;
  gpus[3].ecc_uncorrected_volatile = 2;
  gpus[4].nvlinks_active = 16;
  gpus[5].xids = {{79, 1}};
  const auto rows = check_gpus(gpus);
  EXPECT_EQ(status_of(rows, "node7 gpu1 clocks"), Status::Fail);
  EXPECT_EQ(status_of(rows, "node7 gpu2 pcie"), Status::Fail);
  EXPECT_EQ(status_of(rows, "node7 gpu3 ecc"), Status::Fail);
  EXPECT_EQ(status_of(rows, "node7 gpu4 nvlink"), Status::Fail);
  EXPECT_EQ(status_of(rows, "node7 gpu5 xid"), Status::Fail);
  int fails = 0;
  for (const auto& r : rows) fails += r.status == Status::Fail;
  EXPECT_EQ(fails, 5);
  EXPECT_EQ(doctor::exit_code(rows), 1);
}

TEST(GpuChecks, NormalStatesAreNotAlarms) {
  GpuFacts idle_gen = healthy(0);
  idle_gen.pcie_gen = 1;  // an idle GPU lowers its link generation
  GpuFacts capped = healthy(1);
  capped.clock_event_reasons = 0x4;  // at its power cap under load
  GpuFacts old_ecc = healthy(2);
  old_ecc.ecc_uncorrected_aggregate = 4;  // lifetime, none since the driver loaded
  const auto rows = check_gpus({idle_gen, capped, old_ecc});
  EXPECT_EQ(status_of(rows, "node7 gpu0 pcie"), Status::Pass);
  EXPECT_EQ(status_of(rows, "node7 gpu1 clocks"), Status::Pass);
  EXPECT_EQ(status_of(rows, "node7 gpu2 ecc"), Status::Warn);
  GpuFacts busy_gen = healthy(3);
  busy_gen.clock_event_reasons = 0;
  busy_gen.pcie_gen = 3;
  EXPECT_EQ(status_of(check_gpus({busy_gen}), "node7 gpu3 pcie"), Status::Warn);
}

TEST(GpuChecks, WhatNvmlCannotSayIsSkipNotPass) {
  GpuFacts consumer;
  consumer.host = "desk";
  const auto rows = check_gpus({consumer});
  for (const auto& r : rows) EXPECT_EQ(r.status, Status::Skip) << r.name;
  EXPECT_EQ(no_nvml("desk", "no NVIDIA driver").status, Status::Skip);
}

TEST(XidLog, CountsEachCodeForItsOwnGpu) {
  const std::vector<std::string> log = {
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
      "NVRM: Xid (PCI:0000:3b:00): 13, pid=99, Graphics Exception",
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
      "NVRM: Xid (PCI:0000:86:00): 48, pid=5, DBE",
      "usb 1-1: new device",
  };
  const auto xids = xids_for(log, "00000000:3B:00.0");
  EXPECT_EQ(xids.size(), 2u);
  EXPECT_EQ(xids.at(79), 2);
  EXPECT_EQ(xids.at(13), 1);
  EXPECT_EQ(xids_for(log, "00000000:86:00.0").at(48), 1);
  EXPECT_TRUE(xids_for(log, "00000000:AF:00.0").empty());
  EXPECT_EQ(xid_meaning(79), "GPU has fallen off the bus");
}

}  // namespace
}  // namespace ddx::gpu
