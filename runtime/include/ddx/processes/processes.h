#pragma once
// Finding what a finished job left behind: processes alive (not zombies), other than this one,
// that carry a unique string in their command line (the job's own folder) or belong to a given
// process group. `ddx launch` puts its workers in a group of their own, hence the command line.
#include <sys/types.h>

#include <string>
#include <vector>

namespace ddx {

// Alive and not a zombie.
bool process_alive(pid_t pid);

// The processes whose command line contains `cmdline_needle` (ignored when empty) or whose
// process group is `group` (ignored when <= 0).
std::vector<pid_t> live_processes(const std::string& cmdline_needle, pid_t group = -1);

}  // namespace ddx
