#include "health/level1_paths.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "ddx/text/text.h"
#include "health/level1_rows.h"

namespace ddx::health {
namespace {

std::string gib(uint64_t bytes) { return printf_text("%.1f GiB", static_cast<double>(bytes) / (1ULL << 30)); }

double fraction(uint64_t part, uint64_t whole) { return whole == 0 ? 1.0 : static_cast<double>(part) / whole; }

}  // namespace

Check judge_path(const std::string& path, const PathProbe& p) {
  const std::string name = "path " + path;
  if (!p.error.empty()) {
    return make_check(name, State::Critical, path + ": " + p.error,
                      "mount or create " + path + " (a checkpoint or scratch folder that is gone fails the job's "
                      "first write), or drop it from --path",
                      p.error + " " + path);
  }
  const double free_fraction = fraction(p.free_bytes, p.size_bytes);
  const bool counts_inodes = p.total_inodes > 0;
  const double inode_fraction = fraction(p.free_inodes, p.total_inodes);
  std::string value = printf_text("%s free of %s (%.1f%%)", gib(p.free_bytes).c_str(), gib(p.size_bytes).c_str(),
                                  100 * free_fraction);
  value += counts_inodes ? printf_text(", %llu inodes free (%.1f%%)", static_cast<unsigned long long>(p.free_inodes),
                                       100 * inode_fraction)
                         : ", inodes not counted by this file system";
  State state = State::Ok;
  // The reason says what is wrong first: plain `sinfo -R` shows a drain reason's first 20
  // characters, and a long path would push "full" out of them.
  std::string reason;
  if (p.free_bytes < kPathWarnFreeBytes || free_fraction < kPathWarnFreeFraction) {
    state = State::Warn;
    reason = "low space " + path;
  }
  if (counts_inodes && inode_fraction < kPathWarnFreeFraction) {
    state = State::Warn;
    reason = "low inodes " + path;
  }
  if (p.free_bytes < kPathCriticalFreeBytes || free_fraction < kPathCriticalFreeFraction) {
    state = State::Critical;
    reason = "full " + path;
  }
  if (counts_inodes && inode_fraction < kPathCriticalFreeFraction) {
    state = State::Critical;
    reason = "no inodes " + path;
  }
  Check check = make_check(name, state, path + ": " + value,
                           "free space (or inodes: many small files) on " + path +
                               ": a checkpoint write that runs out loses the steps since the last one",
                           reason);
  check.metrics.push_back({"ddx_health_path_free_bytes", static_cast<double>(p.free_bytes), {{"path", path}}, false});
  if (counts_inodes) {
    check.metrics.push_back({"ddx_health_path_free_inodes", static_cast<double>(p.free_inodes), {{"path", path}}, false});
  }
  return check;
}

PathProbe probe_path(const std::string& path) {
  PathProbe p;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    p.error = errno == ENOENT ? "missing" : std::string("cannot be read: ") + std::strerror(errno);
    return p;
  }
  if (!S_ISDIR(st.st_mode)) {
    p.error = "not a directory";
    return p;
  }
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) {
    p.error = std::string("statvfs failed: ") + std::strerror(errno);
    return p;
  }
  if (fs.f_flag & ST_RDONLY) {
    p.error = "read-only file system";
    return p;
  }
  if (::access(path.c_str(), W_OK) != 0) {
    p.error = "not writable by uid " + std::to_string(::geteuid()) + " (" + std::strerror(errno) + ")";
    return p;
  }
  p.size_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  p.free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  p.total_inodes = fs.f_files;
  p.free_inodes = fs.f_favail;
  return p;
}

std::vector<Check> path_checks(const std::vector<std::string>& paths, double deadline_s) {
  // Each probe in a detached thread: one stuck in a hung mount is left behind (the process
  // exits without it) instead of holding the run.
  std::vector<std::future<PathProbe>> answers;
  for (const std::string& path : paths) {
    auto promise = std::make_shared<std::promise<PathProbe>>();
    answers.push_back(promise->get_future());
    std::thread([promise, path] { promise->set_value(probe_path(path)); }).detach();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
  std::vector<Check> rows;
  for (size_t i = 0; i < paths.size(); ++i) {
    PathProbe probe;
    if (answers[i].wait_until(deadline) == std::future_status::ready) {
      probe = answers[i].get();
    } else {
      probe.error = printf_text("no answer within %.0f s (a hung network mount?)", deadline_s);
    }
    rows.push_back(judge_path(paths[i], probe));
  }
  return rows;
}

}  // namespace ddx::health
