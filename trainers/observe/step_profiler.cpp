#include "observe/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "observe/profile_report.h"

namespace ddx::train {
namespace {

namespace fs = std::filesystem;
namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

bool names_json_file(const std::string& target) {
  return target.size() > 5 && target.compare(target.size() - 5, 5, ".json") == 0;
}

}  // namespace

ProfilePaths profile_paths(const std::string& target, int rank, int world_size) {
  const std::string rank_part = world_size > 1 ? ".rank" + std::to_string(rank) : "";
  if (names_json_file(target)) {
    const std::string stem = target.substr(0, target.size() - 5);
    return {stem + rank_part + ".json", stem + rank_part + ".txt", stem + rank_part + ".summary.json"};
  }
  const fs::path dir(target);
  return {(dir / ("trace" + rank_part + ".json")).string(), (dir / ("profile" + rank_part + ".txt")).string(),
          (dir / ("profile" + rank_part + ".json")).string()};
}

void check_profile_target(const std::string& target) {
  if (target.empty()) throw UsageError("--profile is empty: give a folder, or a .json file for the trace");
  std::error_code ec;
  const bool json = names_json_file(target);
  if (fs::exists(target, ec)) {
    const bool folder = fs::is_directory(target, ec);
    if (json && folder) throw UsageError("--profile " + target + " is a folder; a .json name is the trace file to write");
    if (!json && !folder) {
      throw UsageError("--profile " + target + " is a file; give a folder, or a .json file for the trace");
    }
    return;
  }
  // The files are created under the nearest existing folder: it must be one, and take files.
  if (json) {
    check_output_file("--profile", target);
  } else {
    check_output_folder("--profile", target);
  }
}

StepProfiler::StepProfiler(std::string target, std::string title, int rank, int world_size, bool cuda, int64_t first,
                           int64_t count)
    : target_(std::move(target)), title_(std::move(title)), rank_(rank), world_size_(world_size), cuda_(cuda),
      first_(first), last_(first + count - 1) {}

StepProfiler::~StepProfiler() {
  if (running_) kineto::disableProfiler();  // an exception left the window: nothing written
}

void StepProfiler::before_step(int64_t step) {
  if (step != first_ || running_) return;
  const ProfilerConfig config(ProfilerState::KINETO);
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda_) activities.insert(ActivityType::CUDA);
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  running_ = true;
}

void StepProfiler::after_step(int64_t step) {
  if (step == last_ && running_) stop_and_write();
}

void StepProfiler::finish() {
  if (running_) stop_and_write();
}

void StepProfiler::stop_and_write() {
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  running_ = false;
  std::vector<ProfileEvent> events;
  events.reserve(result->events().size());
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CPU) continue;  // device kernels: in the trace, not the tables
    events.push_back({e.name(), e.startThreadId(), static_cast<int64_t>(e.startNs()), static_cast<int64_t>(e.endNs()),
                      e.sequenceNr()});
  }
  const ProfileSummary summary = summarize_profile(events);
  const ProfilePaths paths = profile_paths(target_, rank_, world_size_);
  const fs::path trace(paths.trace);
  if (trace.has_parent_path()) fs::create_directories(trace.parent_path());
  // Kineto writes the file itself: into a temporary beside it, renamed when complete.
  const std::string partial = paths.trace + ".partial-" + std::to_string(::getpid());
  result->save(partial);
  fs::rename(partial, paths.trace);
  const std::string table = profile_table(summary, title_, 25);
  write_file_atomically(paths.table, table);
  write_file_atomically(paths.summary, profile_json(summary));
  if (rank_ == 0) {
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
    log::info("profile: trace ", paths.trace, " (chrome://tracing or ui.perfetto.dev), table ", paths.table,
              ", numbers ", paths.summary);
  }
}

}  // namespace ddx::train
