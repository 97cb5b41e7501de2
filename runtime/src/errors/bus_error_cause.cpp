#include "bus_error_cause.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace ddx::detail {
namespace {

constexpr long kTmpfsMagic = 0x01021994;  // linux/magic.h TMPFS_MAGIC

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

BusErrorCause bus_error_cause(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    uintptr_t begin = 0, end = 0;
    int path_at = -1;  // "begin-end perms offset dev inode   path"
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %n", &begin, &end, &path_at) < 2 ||
        at < begin || at >= end) {
      continue;
    }
    if (path_at < 0 || line[static_cast<size_t>(path_at)] != '/') return {};
    const std::string shown = line.substr(static_cast<size_t>(path_at));
    const std::string folder = shown.substr(0, shown.rfind('/'));  // a deleted file's folder still exists
    struct statfs fs {};
    if (::statfs(folder.empty() ? "/" : folder.c_str(), &fs) != 0 || fs.f_type != kTmpfsMagic) return {};
    const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
    const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_bsize);
    const double size_bytes = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_bsize);
    if (free_bytes >= page) return {};
    return {"; the address is in " + shown + ", a file on a tmpfs (" + folder + ") with " + mib(free_bytes) + " of " +
                mib(size_bytes) + " MiB free: shared memory is exhausted (raise the size of " + folder +
                ", e.g. docker run --shm-size)",
            shown, folder, free_bytes, size_bytes};
  }
  return {};
}

}  // namespace ddx::detail
