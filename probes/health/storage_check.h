#pragma once
// The storage test of `ddx health --level 2` on each --path (a checkpoint or scratch folder):
// what a job's checkpoint does to it, a large write made durable with fsync, then read back
// and verified. No LibTorch (level 2's other checks are in health/torch/).
#include <functional>
#include <string>

#include "health/health_check.h"

namespace ddx::health {

// Writes `mib` MiB in 4 MiB chunks of distinct data to a new file in `path`, fsyncs it, drops it
// from the page cache, reads it back, compares the FNV-1a checksums of what was written and what
// was read (ddx/checksum.h), and removes the file. One row, "storage <path>": the write rate
// including the fsync as a judged Metric (ddx_health_storage_write_mbps{path}), and the rate of
// the read-back; CRITICAL naming the path when the file cannot be created, written, synced or
// read back, or reads back different; WARN, untested, when the file system has less than twice
// `mib` free (level 1 judges how full it is). `after_sync` runs with the file's name between the
// fsync and the read-back: tests change the file there.
Check storage_check(const std::string& path, double mib,
                    const std::function<void(const std::string& file)>& after_sync = {});

}  // namespace ddx::health
