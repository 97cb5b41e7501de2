// `ddx probe buserror` with real processes: the SIGBUS of NCCL's SHM transport on a private
// small /dev/shm (named by the launcher's failure table), the same on a tmpfs the user mounted,
// --check's shortfall, and nothing left in the host's /dev/shm. Tests that need a mount
// namespace skip with the reason where the sandbox refuses one.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

constexpr unsigned long long kSegment = 9637888;  // NCCL's SHM segment (hangs-and-bus-errors.md §9.2)

std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) names.insert(e.path().filename());
  return names;
}

RunResult buserror(const std::string& tag, std::vector<std::string> args) {
  std::vector<std::string> argv{DDX_BIN, "probe", "buserror"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_in(scratch_dir("buserror", tag), argv, {}, 90);
}

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

TEST(BuserrorProbe, ReproducesSigbusOnASmallPrivateDevShmAndTheLauncherNamesIt) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());
  const auto before = dev_shm_entries();
  // 2 ranks x 1 peer x 2 channels x 9637888 B = 36.8 MiB > 16 MiB.
  RunResult r = buserror("repro", {"--local-ranks", "2", "--shm-size", "16M"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "SIGBUS (signal 7)")) << r.output;  // the launcher's status column
  EXPECT_TRUE(has(r.output, "ROOT CAUSE")) << r.output;
  EXPECT_TRUE(has(r.output, "REPRODUCED: a worker died of SIGBUS")) << r.output;
  EXPECT_TRUE(has(r.output, "needed 36.8 MiB (" + std::to_string(4 * kSegment) + " B), available 16.0 MiB"))
      << r.output;
  EXPECT_TRUE(has(r.output, "docker run --shm-size=")) << r.output;
  EXPECT_TRUE(has(r.output, "NCCL_SHM_DISABLE=1")) << r.output;
  EXPECT_EQ(dev_shm_entries(), before) << "the host's /dev/shm changed";
}

TEST(BuserrorProbe, EnoughSharedMemoryDoesNotCrash) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());
  RunResult r = buserror("fits", {"--local-ranks", "2", "--shm-size", "64M"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "NOT REPRODUCED")) << r.output;
  EXPECT_TRUE(has(r.output, "local rank 1: 2 segments of 9637888 B mapped and every page written")) << r.output;
}

TEST(BuserrorProbe, ReproducesOnATmpfsTheUserMounted) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());
  // The user's own small tmpfs (mounted here inside a throwaway namespace so the test leaves
  // no mount behind), passed with --shm-dir: no namespace needed by the probe.
  const std::string dir = scratch_dir("buserror", "userdir");
  const std::string mnt = dir + "/shm";
  std::filesystem::create_directories(mnt);
  const std::string script = "mount -t tmpfs -o size=16m tmpfs '" + mnt + "' && exec '" + DDX_BIN +
                             "' probe buserror --local-ranks 2 --shm-dir '" + mnt + "'";
  RunResult r = run_in(dir, {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}, {}, 90);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "SIGBUS (signal 7)")) << r.output;
  EXPECT_TRUE(has(r.output, "tmpfs named by --shm-dir, 16.0 MiB")) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(mnt));
}

TEST(BuserrorProbe, CheckReportsTheShortfallForAGivenSize) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());
  RunResult r = buserror("check-short", {"--check", "--local-ranks", "4", "--shm-size", "64M"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const unsigned long long needed = 4 * 3 * 2 * kSegment, available = 64ULL << 20;
  EXPECT_TRUE(has(r.output, "FAIL: 4 local ranks need 220.6 MiB (" + std::to_string(needed) + " B)")) << r.output;
  EXPECT_TRUE(has(r.output, "short by 156.6 MiB (" + std::to_string(needed - available) + " B)")) << r.output;
  EXPECT_TRUE(has(r.output, "reserved 6 of 24 segments with fallocate")) << r.output;
}

TEST(BuserrorProbe, CheckOnTheRealDevShmReservesAndReleasesEverything) {
  const auto before = dev_shm_entries();
  RunResult r = buserror("check-real", {"--check", "--local-ranks", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "reserved 4 of 4 segments with fallocate")) << r.output;
  EXPECT_TRUE(has(r.output, "PASS: 2 local ranks fit")) << r.output;
  EXPECT_EQ(dev_shm_entries(), before);
}

TEST(BuserrorProbe, BadInputIsOneLineAndExitTwo) {
  RunResult r = buserror("bad-dir", {"--local-ranks", "2", "--shm-dir", DDX_BINARY_DIR});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "is not a tmpfs")) << r.output;
  r = buserror("bad-size", {"--local-ranks", "2", "--shm-size", "lots"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--shm-size 'lots'")) << r.output;
  // Not an unlimited tmpfs (size=0), on which nothing could be reproduced.
  r = buserror("zero-size", {"--local-ranks", "2", "--shm-size", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--shm-size 0 must be above 0")) << r.output;
  r = buserror("no-ranks", {"--check"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--local-ranks N is required")) << r.output;
}

}  // namespace
}  // namespace ddx::testing
