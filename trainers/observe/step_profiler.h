#pragma once
// `ddx train --profile`: LibTorch's profiler (Kineto) over a few steps, written as a Chrome
// trace (chrome://tracing, ui.perfetto.dev) and as the tables of profile_report.h. The phases
// are the scopes the loop and the models record (profile_scope in profile_report.h), which cost
// nothing while the profiler is off.
#include <cstdint>
#include <memory>
#include <string>

namespace ddx::train {

// `ddx train --profile TARGET --profile-steps N` (flags of the command, not TrainOptions: no
// strategy reads them).
struct ProfileOptions {
  std::string target;  // "": no profile
  int64_t steps = 3;
};

// Where --profile's files go. A folder gets trace.json, profile.txt (the table) and
// profile.json (its numbers); a file name ending in .json is the trace itself, with NAME.txt
// and NAME.summary.json beside it. With several ranks each writes its own, ".rankN" before the
// extension.
struct ProfilePaths {
  std::string trace, table, summary;
};
ProfilePaths profile_paths(const std::string& target, int rank, int world_size);

// Throws UsageError naming --profile when the target cannot be one: empty, an existing file
// that is not a .json trace, or an existing folder named *.json.
void check_profile_target(const std::string& target);

class StepProfiler {
 public:
  // Profiles the loop's steps [first, first + count); `title` heads the table; rank 0 prints it.
  StepProfiler(std::string target, std::string title, int rank, int world_size, bool cuda, int64_t first,
               int64_t count);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(int64_t step);
  // After the window's last step: stops the profiler and writes the files.
  void after_step(int64_t step);
  // Writes what was profiled when the loop stops inside the window (SIGTERM).
  void finish();

 private:
  void stop_and_write();
  std::string target_, title_;
  int rank_, world_size_;
  bool cuda_;
  int64_t first_, last_;
  bool running_ = false;
};

}  // namespace ddx::train
