#pragma once
// Level 1's check of the folders given with `ddx health --path DIR` (checkpoint and scratch):
// free space and free inodes, and whether the folder is there and writable. A full one is
// CRITICAL: the next checkpoint write fails and loses the steps since the last one. No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "health/health_check.h"

namespace ddx::health {

// Below either limit: CRITICAL; below either WARN limit: WARN. The absolute floors are the
// doctor's for its save folder (1 GiB FAIL, 10 GiB WARN); the fractions catch a large file
// system that is nearly full. Inodes are judged by fraction only, where the file system counts
// them (some report 0 inodes: nothing to judge).
inline constexpr double kPathCriticalFreeFraction = 0.01, kPathWarnFreeFraction = 0.05;
inline constexpr uint64_t kPathCriticalFreeBytes = 1ULL << 30, kPathWarnFreeBytes = 10ULL << 30;

// What looking at a folder found: `error` says why it cannot take a checkpoint ("missing", "not a
// directory", "read-only file system", "not writable by uid 1000", "no answer within 5 s"), or is
// empty and the figures are statvfs's (for an unprivileged writer: f_bavail, f_favail).
struct PathProbe {
  std::string error;
  uint64_t size_bytes = 0, free_bytes = 0;
  uint64_t total_inodes = 0, free_inodes = 0;
};

// The row "path <path>": a pure function of the probe.
Check judge_path(const std::string& path, const PathProbe& probe);

// Looks at `path` (stat, access, statvfs) in this thread.
PathProbe probe_path(const std::string& path);

// One row per path, in order. Every path is looked at in its own thread, all within
// `deadline_s`: a hung network mount answers nothing and would hold level 1 past SLURM's 60 s.
std::vector<Check> path_checks(const std::vector<std::string>& paths, double deadline_s = 5);

}  // namespace ddx::health
