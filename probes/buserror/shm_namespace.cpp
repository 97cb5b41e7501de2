#include "buserror/shm_namespace.h"

#include <sched.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>

namespace ddx::shm {

std::string shrink_dev_shm(uint64_t bytes) {
  auto why = [](const std::string& call) { return call + ": " + std::strerror(errno); };
  if (::unshare(CLONE_NEWNS) != 0) return why("unshare(CLONE_NEWNS)");
  // Without this, mounts made here would propagate back to the host's shared mounts.
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return why("mount --make-rprivate /");
  }
  const std::string data = "size=" + std::to_string(bytes) + ",mode=1777";
  if (::mount("ddx-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0) {
    return why("mount -t tmpfs -o " + data + " over /dev/shm");
  }
  return "";
}

}  // namespace ddx::shm
