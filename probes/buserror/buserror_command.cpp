// `ddx probe buserror`: NCCL's shared-memory transport on a /dev/shm too small for it.
//   reproduce (default): N local workers (under ddx launch's supervisor) map their segments the
//     way NCCL 2.12.7-2.18 does, on a private tmpfs of --shm-size, and die of SIGBUS; then the
//     bytes needed vs available and the fixes.
//   --check: the same allocation on the real /dev/shm, reserved with fallocate so that a
//     shortage is an error instead of a crash; PASS/FAIL for N local ranks on this machine.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "buserror/buserror_command.h"
#include "buserror/shm_model.h"
#include "ddx/text/byte_sizes.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/processes/run_process.h"
#include "ddx/processes/shm_namespace.h"
#include "ddx/processes/shm_segments.h"
#include "launcher/launch_options.h"
#include "launcher/supervisor.h"

namespace ddx::cli {
namespace {

namespace fs = std::filesystem;

struct BuserrorFlags {
  int local_ranks = 0;
  int channels = shm::kDefaultChannels;
  std::string shm_size;  // empty: the real /dev/shm (--check) or 64M (reproduce)
  std::string shm_dir;   // a tmpfs folder the user mounted, instead of a private /dev/shm
  bool check = false;
  // Internal, set by the reproducing parent for its workers.
  bool worker = false;
  std::string barrier_dir;
};

constexpr const char* kDockerDefault = "64M";

void print_fixes(uint64_t needed) {
  std::printf("fixes:\n");
  for (const auto& line : shm::fixes(needed)) std::printf("  - %s\n", line.c_str());
}

// Where the segments go: a private tmpfs over /dev/shm (root), the user's folder, or the real
// /dev/shm (--check without --shm-size). Returns the folder and a line describing it.
std::pair<std::string, std::string> prepare_shm(const BuserrorFlags& f, bool private_wanted) {
  if (!f.shm_dir.empty()) {
    const shm::ShmSpace space = shm::space_of(f.shm_dir);
    if (!space.is_tmpfs) {
      throw UsageError("--shm-dir " + f.shm_dir + " is not a tmpfs: the crash needs memory-backed "
                       "files (mount one: mount -t tmpfs -o size=64m tmpfs " + f.shm_dir + ")");
    }
    return {f.shm_dir, f.shm_dir + " (tmpfs named by --shm-dir, " + shm::mib(space.size_bytes) + ")"};
  }
  if (!private_wanted) return {"/dev/shm", "/dev/shm (this machine's own)"};
  const uint64_t bytes = ddx::parse_bytes("--shm-size", f.shm_size.empty() ? kDockerDefault : f.shm_size);
  if (bytes == 0) throw UsageError("--shm-size 0 must be above 0 (tmpfs reads size 0 as no limit)");
  if (const std::string why = shm::shrink_dev_shm(bytes); !why.empty()) {
    throw UsageError("cannot give this probe a private /dev/shm (" + why + "): it needs root "
                     "(CAP_SYS_ADMIN) for a mount namespace; or mount a small tmpfs yourself "
                     "(mount -t tmpfs -o size=64m tmpfs /mnt/small-shm) and pass --shm-dir /mnt/small-shm");
  }
  return {"/dev/shm", "/dev/shm = private tmpfs of " + shm::mib(shm::space_of("/dev/shm").size_bytes) +
                          " in a private mount namespace (the host's /dev/shm is untouched)"};
}

// One local rank: map its segments sparse and touch them, then wait for the others so that
// every rank's segments are held at once, as in a live communicator.
int run_worker(const BuserrorFlags& f) {
  const RendezvousInfo info = resolve_rendezvous(current_env());
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  const shm::ShmPlan plan = shm::plan(info.local_world_size, f.channels, shm::segment_bytes(current_env()));
  shm::SegmentSet segments;
  for (size_t i = 0; i < plan.owned_by(info.local_rank).size(); ++i) {
    segments.add_sparse_and_touch(f.shm_dir, plan.segment_bytes);
  }
  std::printf("local rank %d: %zu segments of %llu B mapped and every page written (%s)\n",
              info.local_rank, segments.count(), static_cast<unsigned long long>(plan.segment_bytes),
              shm::mib(segments.bytes()).c_str());
  std::fflush(stdout);
  const fs::path ready = fs::path(f.barrier_dir) / ("ready." + std::to_string(info.local_rank));
  std::fclose(std::fopen(ready.c_str(), "w"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    int arrived = 0;
    for (int r = 0; r < info.local_world_size; ++r) {
      arrived += fs::exists(fs::path(f.barrier_dir) / ("ready." + std::to_string(r)));
    }
    if (arrived == info.local_world_size) return 0;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "local rank %d: the other ranks did not finish their segments in 60 s\n",
                   info.local_rank);
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int reproduce(BuserrorFlags f) {
  const shm::ShmPlan plan = shm::plan(f.local_ranks, f.channels, shm::segment_bytes(current_env()));
  auto [dir, where] = prepare_shm(f, true);
  const shm::ShmSpace space = shm::space_of(dir);
  std::printf("ddx probe buserror: %d local ranks, NCCL SHM segment %llu B, on %s\n", f.local_ranks,
              static_cast<unsigned long long>(plan.segment_bytes), where.c_str());
  std::printf("needs: %s\n", plan.formula().c_str());
  std::printf("each rank creates its segments sparse (ftruncate), maps them and writes every page, "
              "as NCCL 2.12.7-2.18.x does\n");
  std::fflush(stdout);

  char barrier_template[] = "/tmp/ddx-buserror-XXXXXX";
  if (!::mkdtemp(barrier_template)) throw std::runtime_error("cannot create a folder in /tmp");
  const std::string barrier = barrier_template;
  launcher::LaunchOptions launch;
  launch.nproc_per_node = f.local_ranks;
  launch.grace_period_s = 2.0;
  launch.command = {self_executable(), "probe", "buserror", "--worker", "--shm-dir", dir,
                    "--channels", std::to_string(f.channels), "--barrier-dir", barrier};
  launcher::validate(launch);
  // The launcher copies the root cause's error file here: which signal killed it.
  const std::string root_cause = barrier + "/root_cause.json";
  ::setenv("TORCHELASTIC_ERROR_FILE", root_cause.c_str(), 1);
  const int rc = launcher::run_supervised(launch);
  ::unsetenv("TORCHELASTIC_ERROR_FILE");
  const auto error = read_error_file(root_cause);
  fs::remove_all(barrier);

  const uint64_t needed = plan.total_bytes();
  std::printf("\n/dev/shm for NCCL's SHM transport: needed %s (%llu B), available %s (%llu B)",
              shm::mib(needed).c_str(), static_cast<unsigned long long>(needed),
              shm::mib(space.free_bytes).c_str(), static_cast<unsigned long long>(space.free_bytes));
  if (needed > space.free_bytes) std::printf(", short by %s", shm::mib(needed - space.free_bytes).c_str());
  std::printf("\n");
  if (rc == 0) {
    std::printf("NOT REPRODUCED: every rank's segments fit; no bus error at %d local ranks\n", f.local_ranks);
    return 0;
  }
  if (error && error->signal == std::string("SIGBUS")) {
    std::printf("REPRODUCED: a worker died of SIGBUS writing a page of its sparse segment that the "
                "full tmpfs could not back (NCCL 2.12.7-2.18.x: 'Bus error' inside ncclCommInitRank)\n");
  } else {
    std::printf("FAILED without SIGBUS: the workers failed another way (see the launcher's table above)\n");
  }
  print_fixes(needed);
  return 1;
}

int check(const BuserrorFlags& f) {
  const shm::ShmPlan plan = shm::plan(f.local_ranks, f.channels, shm::segment_bytes(current_env()));
  auto [dir, where] = prepare_shm(f, !f.shm_size.empty());
  const shm::ShmSpace space = shm::space_of(dir);
  const uint64_t needed = plan.total_bytes();
  std::printf("ddx probe buserror --check: %s: %s, %s free%s\n", where.c_str(),
              shm::mib(space.size_bytes).c_str(), shm::mib(space.free_bytes).c_str(),
              space.is_tmpfs ? "" : " (not a tmpfs)");
  std::printf("needs: %s\n", plan.formula().c_str());

  // Reserve (never past the free space statfs reported: the real /dev/shm is shared with
  // every other process on the machine, and filling it would make *them* fail).
  shm::SegmentSet segments;
  int error = 0;
  size_t skipped = 0;
  for (size_t i = 0; i < plan.segments.size() && error == 0; ++i) {
    if (segments.bytes() + plan.segment_bytes > space.free_bytes) {
      skipped = plan.segments.size() - i;
      break;
    }
    error = segments.add_fallocated(dir, plan.segment_bytes);
  }
  std::printf("reserved %zu of %zu segments with fallocate (%s), then released them",
              segments.count() - (error ? 1 : 0), plan.segments.size(), shm::mib(segments.bytes()).c_str());
  if (skipped) std::printf("; %zu not attempted: they exceed the free space", skipped);
  if (error) std::printf("; fallocate failed: %s", std::strerror(error));
  std::printf("\n");
  if (!skipped && !error) {
    std::printf("PASS: %d local ranks fit: need %s, %s free\n", f.local_ranks, shm::mib(needed).c_str(),
                shm::mib(space.free_bytes).c_str());
    return 0;
  }
  const uint64_t short_by = needed > space.free_bytes ? needed - space.free_bytes : needed - segments.bytes();
  std::printf("FAIL: %d local ranks need %s (%llu B), %s has %s free: short by %s (%llu B). "
              "NCCL 2.12.7-2.18.x would die with SIGBUS, >= 2.19.1 fails with 'No space left on device'\n",
              f.local_ranks, shm::mib(needed).c_str(), static_cast<unsigned long long>(needed), dir.c_str(),
              shm::mib(space.free_bytes).c_str(), shm::mib(short_by).c_str(),
              static_cast<unsigned long long>(short_by));
  print_fixes(needed);
  return 1;
}

}  // namespace

Subcommand add_buserror_command(CLI::App& probe) {
  auto f = std::make_shared<BuserrorFlags>();
  CLI::App* cmd = probe.add_subcommand(
      "buserror",
      "Reproduce the SIGBUS of NCCL's shared-memory transport on a /dev/shm too small for N local "
      "ranks (a private tmpfs; needs root, or --shm-dir), then explain it. --check: would this "
      "machine's /dev/shm hold N local ranks?");
  cmd->add_option("--local-ranks", f->local_ranks, "Processes per node that talk over SHM")
      ->check(CLI::Range(2, 1024));
  cmd->add_option("--shm-size", f->shm_size,
                  "Size of the private tmpfs mounted over /dev/shm (default 64M, Docker's; with "
                  "--check: check this size instead of the real /dev/shm)");
  cmd->add_option("--shm-dir", f->shm_dir, "Use this tmpfs folder (mounted by you) instead of /dev/shm");
  cmd->add_option("--channels", f->channels, "NCCL channels per peer pair (logs show 2 to 32)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_flag("--check", f->check, "Reserve the same segments with fallocate instead of crashing");
  cmd->add_flag("--worker", f->worker)->group("");
  cmd->add_option("--barrier-dir", f->barrier_dir)->group("");

  return {cmd, [f]() {
            if (f->worker) return run_worker(*f);
            if (f->local_ranks == 0) throw UsageError("ddx probe buserror: --local-ranks N is required");
            if (!f->shm_dir.empty() && !f->shm_size.empty()) {
              throw UsageError("--shm-size and --shm-dir: give one (--shm-dir is already sized by its mount)");
            }
            return f->check ? check(*f) : reproduce(*f);
          }};
}

}  // namespace ddx::cli
