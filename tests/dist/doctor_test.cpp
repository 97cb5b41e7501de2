// `ddx doctor` with real processes: under ddx launch and mpiexec every rank's facts reach rank
// 0's table; real failing inputs (an NCCL_SOCKET_IFNAME naming no interface, a 64 MiB /dev/shm
// in a private mount namespace) turn their rows FAIL/WARN with the fix; --json has every check.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "launch_verdict.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::vector<std::string> launch(int np, std::vector<std::string> args) {
  std::vector<std::string> argv{DDX_BIN, "launch", "-np", std::to_string(np), "--", DDX_BIN, "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(Doctor, UnderDdxLaunchEveryRankReportsAndTheJsonHasEveryCheck) {
  const std::string dir = scratch_dir("doctor", "launch");
  RunResult r = run_in(dir, launch(2, {"--json", dir + "/doctor.json", "--save-dir", dir}), {}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "ddx doctor: 2 ranks on 1 host, rendezvous via ddx launch")) << r.output;
  EXPECT_TRUE(has(r.output, "GPUs vs local ranks")) << r.output;
  EXPECT_TRUE(has(r.output, "skipped: no GPU") || has(r.output, "GPU for 2 local ranks")) << r.output;
  EXPECT_TRUE(has(r.output, "OMP_NUM_THREADS=1")) << r.output;  // ddx launch sets it
  const auto report = nlohmann::json::parse(read_file(dir + "/doctor.json"));
  EXPECT_EQ(report["ranks"].size(), 2u);
  EXPECT_EQ(report["checks"].size(), 15u);
  EXPECT_TRUE(report["passed"].get<bool>());
  for (const auto& rank : report["ranks"]) EXPECT_LT(std::abs(rank["clock_offset_ms"].get<double>()), 1000.0);
}

TEST(Doctor, ARankOnOtherAtenKernelsIsNamedWithTheFix) {
  // Rank 1 alone on ATen's baseline kernels, as on a host whose CPU lacks AVX2: its replicas'
  // bits differ (docs/thresholds.md), so the doctor must say so before a replica check does.
  const std::string dir = scratch_dir("doctor", "kernels");
  // Rank 0 on the CPU's own choice whatever the caller's environment (CI also runs the suite
  // under ATEN_CPU_CAPABILITY=default); a CPU without AVX2 has no second path to differ from.
  DDX_SKIP_IF_REFUSED(read_file("/proc/cpuinfo").find(" avx2") != std::string::npos ? ""
                                                                                     : "this CPU has no AVX2: ATen has one kernel path");
  const std::string script = "if [ \"$RANK\" = 1 ]; then export ATEN_CPU_CAPABILITY=default; else unset ATEN_CPU_CAPABILITY; fi; "
                             "exec '" + std::string(DDX_BIN) + "' doctor --save-dir '" + dir + "'";
  RunResult r = run_in(dir, {DDX_BIN, "launch", "-np", "2", "--", "/bin/sh", "-c", script}, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;  // a WARN
  EXPECT_TRUE(has(r.output, "same CPU kernels on every rank  WARN    ATen DEFAULT")) << r.output;
  EXPECT_TRUE(has(r.output, "on rank 1 (")) << r.output;
  EXPECT_TRUE(has(r.output, "fix: export the same ATEN_CPU_CAPABILITY")) << r.output;
}

TEST(Doctor, UnderMpiexec) {
  const std::string dir = scratch_dir("doctor", "mpiexec");
  RunResult r = run_in(dir, {"/usr/bin/mpiexec.hydra", "-n", "2", DDX_BIN, "doctor", "--save-dir", dir}, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "ddx doctor: 2 ranks on 1 host, rendezvous via MPICH")) << r.output;
}

TEST(Doctor, AnInterfaceThatDoesNotExistFailsWithTheFix) {
  const std::string dir = scratch_dir("doctor", "ifname");
  // A bad GLOO_SOCKET_IFNAME would stop Gloo itself; the doctor must still report it.
  RunResult r = run_in(dir, launch(2, {"--save-dir", dir}),
                       {{"NCCL_SOCKET_IFNAME", "nosuch0"}, {"GLOO_SOCKET_IFNAME", "nosuch1"}}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "NCCL_SOCKET_IFNAME=nosuch0 on rank 0")) << r.output;
  EXPECT_TRUE(has(r.output, "no interface 'nosuch0'")) << r.output;
  EXPECT_TRUE(has(r.output, "GLOO_SOCKET_IFNAME=nosuch1 on rank 1")) << r.output;
  EXPECT_TRUE(has(r.output, "fix: name an interface that exists on every host")) << r.output;
  // The doctor's FAIL is its verdict: both ranks end with it; no rank is blamed for a crash.
  expect_launch_reported_verdict(r.output, 2, 1, "doctor: 15 checks: ");
  EXPECT_TRUE(has(r.output, " SKIP; FAIL: interfaces named in env (NCCL_SOCKET_IFNAME=nosuch0 on rank 0")) << r.output;
  EXPECT_TRUE(has(r.output, "); interface Gloo will use (")) << r.output;
}

TEST(Doctor, ASmallDevShmIsReportedAgainstTheLocalRanks) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());  // reason: process_helpers.h
  const std::string dir = scratch_dir("doctor", "shm");
  const std::string script = "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec '" + std::string(DDX_BIN) +
                             "' launch -np 4 -- '" + DDX_BIN + "' doctor --save-dir '" + dir + "'";
  RunResult r = run_in(dir, {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}, {}, 60);
  // No GPU here: NCCL would need the space, Gloo does not, so a WARN (a FAIL with GPUs).
  EXPECT_TRUE(has(r.output, "64.0 MiB free, 4 local ranks need 220.6 MiB")) << r.output;
  EXPECT_TRUE(has(r.output, "fix: docker run --shm-size=2g")) << r.output;
}

}  // namespace
}  // namespace ddx::testing
