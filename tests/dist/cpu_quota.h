#pragma once
// A real slowdown for the tests that must find a slow rank or host: a cgroup whose CPU quota is
// a fraction of one core (cgroup v2's cpu.max, or v1's cpu.cfs_quota_us), and a wrapper that
// puts a command (and whatever it starts) into it before exec. The kernel's scheduler does the
// throttling, so the probe under test measures a genuinely slower rank, not a faked number.
// Root only; refused() says why not elsewhere. The group is removed on destruction.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ddx::testing {

class CpuQuota {
 public:
  // `fraction` of one CPU, enforced every `period_us` (short periods throttle smoothly).
  explicit CpuQuota(double fraction, int period_us = 20000) {
    const std::string name = "ddx-test-quota-" + std::to_string(::getpid());
    const long quota_us = static_cast<long>(fraction * period_us);
    // cgroup v2 with the cpu controller available to children of the root.
    for (const std::string root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      if (read(root + "/cgroup.controllers").find("cpu") == std::string::npos) continue;
      write(root + "/cgroup.subtree_control", "+cpu");
      const std::string dir = root + "/" + name;
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) continue;
      if (write(dir + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us))) {
        dir_ = dir;
        return;
      }
      ::rmdir(dir.c_str());
    }
    // cgroup v1's cpu hierarchy.
    const std::string dir = "/sys/fs/cgroup/cpu/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      why_ = "cannot create a cgroup (no writable cgroup v2 with the cpu controller, nor v1's /sys/fs/cgroup/cpu)";
      return;
    }
    if (!write(dir + "/cpu.cfs_period_us", std::to_string(period_us)) ||
        !write(dir + "/cpu.cfs_quota_us", std::to_string(quota_us))) {
      ::rmdir(dir.c_str());
      why_ = "cannot set a CPU quota on " + dir;
      return;
    }
    dir_ = dir;
  }

  ~CpuQuota() {
    if (dir_.empty()) return;
    for (int round = 0; round < 50; ++round) {  // a test that failed may leave its processes
      std::istringstream procs(read(dir_ + "/cgroup.procs"));
      bool any = false;
      for (pid_t pid; procs >> pid;) {
        ::kill(pid, SIGKILL);
        any = true;
      }
      if (!any && ::rmdir(dir_.c_str()) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  CpuQuota(const CpuQuota&) = delete;
  CpuQuota& operator=(const CpuQuota&) = delete;

  const std::string& refused() const { return why_; }

  // `argv` started inside the group: a shell moves itself in, then execs the command.
  std::vector<std::string> wrap(const std::vector<std::string>& argv) const {
    std::vector<std::string> out = {"/bin/sh", "-c", "echo $$ > '" + dir_ + "/cgroup.procs' && exec \"$@\"", "sh"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  // A shell condition-and-move for one rank of a launched job: `sh -c` text that moves the
  // shell into the group when $RANK is `rank`, then execs the rest ("$@").
  std::vector<std::string> wrap_rank(int rank, const std::vector<std::string>& argv) const {
    std::vector<std::string> out = {"/bin/sh", "-c",
                                    "if [ \"$RANK\" = " + std::to_string(rank) + " ]; then echo $$ > '" + dir_ +
                                        "/cgroup.procs' || exit 97; fi; exec \"$@\"",
                                    "sh"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static bool write(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }

  std::string dir_;
  std::string why_;
};

}  // namespace ddx::testing
