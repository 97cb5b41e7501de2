#pragma once
// Runs one child command with its output in a log file and a hard timeout after which its
// whole process group is killed (a hung training run never hangs the suite).
#include <map>
#include <string>
#include <vector>

namespace ddx {

struct ProcessOutcome {
  int exit_code = -1;   // -1: killed by a signal or timed out
  bool timed_out = false;
  double seconds = 0;
  int left_in_group = 0;  // processes still in the child's group when it exited (then killed)
};

ProcessOutcome run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::string& log_path, double timeout_s);

// The running ddx binary (for launching runs of itself).
std::string self_executable();

// The last `n` lines of a file, for failure messages.
std::string tail_lines(const std::string& path, int n);

}  // namespace ddx
