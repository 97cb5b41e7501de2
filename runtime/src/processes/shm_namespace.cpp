#include "ddx/processes/shm_namespace.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::string private_dev_shm_refused() {
  int fds[2];
  if (::pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    ::close(fds[0]);
    const std::string why = shrink_dev_shm(uint64_t{1} << 20);
    const ssize_t written = ::write(fds[1], why.data(), why.size());
    ::_exit(written == static_cast<ssize_t>(why.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string why;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);) {
    if (n > 0) why.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return why;
}

}  // namespace ddx::shm
