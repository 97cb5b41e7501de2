#include "ddx/processes/processes.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace ddx {

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

std::vector<pid_t> live_processes(const std::string& cmdline_needle, pid_t group) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0 || pid == ::getpid() || !process_alive(pid)) continue;
    if (group > 0 && ::getpgid(pid) == group) {
      found.push_back(pid);
      continue;
    }
    if (cmdline_needle.empty()) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(cmdline_needle) != std::string::npos) found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

}  // namespace ddx
