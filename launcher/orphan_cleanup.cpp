#include "launcher/orphan_cleanup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ddx::launcher {
namespace {

// The parent pid from /proc/<pid>/stat: the field after the ")" closing the command name (which
// may itself contain spaces and parentheses) and the state letter.
pid_t parent_of(const std::string& pid_dir) {
  std::ifstream in("/proc/" + pid_dir + "/stat");
  std::string stat;
  std::getline(in, stat);
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  return static_cast<pid_t>(std::atol(stat.c_str() + close + 4));
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (dirent* entry = ::readdir(proc)) {
    std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(name) == parent) children.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  ::closedir(proc);
  return children;
}

}  // namespace

void become_child_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

int kill_remaining_children() {
  int killed = 0;
  // Each round kills one generation; their children arrive here for the next round.
  for (int round = 0; round < 16; ++round) {
    std::vector<pid_t> children = children_of(::getpid());
    if (children.empty()) break;
    for (pid_t child : children) {
      if (::kill(child, SIGKILL) == 0) ++killed;
    }
    for (pid_t child : children) ::waitpid(child, nullptr, 0);
  }
  // Zombies already gone from /proc's view but not yet reaped.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return killed;
}

}  // namespace ddx::launcher
