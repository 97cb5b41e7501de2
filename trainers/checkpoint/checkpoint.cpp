#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ddx/processes/atomic_file.h"
#include "ddx/checksum.h"
#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_events.h"

namespace ddx::train {
namespace fs = std::filesystem;
namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%09lld", static_cast<long long>(step));
  return buf;
}

// The step a checkpoint folder is named after (step_name's inverse), -1 when it is not one.
int64_t step_of_folder(const fs::path& folder) {
  const std::string name = folder.filename().string();
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.find_first_not_of("0123456789", 5) != std::string::npos) {
    return -1;
  }
  return std::stoll(name.substr(5));
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<fs::path> complete_checkpoints(const std::string& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos &&
        fs::exists(entry.path() / "trainer_state.json")) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Renames a corrupt checkpoint out of the step_<N> names that resume and rotation read:
// <folder>.corrupt, or .corrupt.2, .corrupt.3, ... when an earlier one of the same step is
// there. rename(2) is atomic, so the folder is never half-moved. Returns what was done, for the
// warning: "renamed to <name>", or why it could not be.
std::string set_aside(const fs::path& folder) {
  fs::path target = folder.string() + ".corrupt";
  for (int n = 2; fs::exists(target); ++n) target = folder.string() + ".corrupt." + std::to_string(n);
  std::error_code ec;
  fs::rename(folder, target, ec);
  if (ec) return "could not be renamed to " + target.filename().string() + " (" + ec.message() + ")";
  fsync_path(folder.parent_path().string());
  return "renamed to " + target.filename().string();
}

}  // namespace

CheckpointDir::CheckpointDir(std::string experiment_dir) : root_(std::move(experiment_dir) + "/checkpoints") {}

std::string CheckpointDir::staging_folder(int64_t step) const {
  return root_ + "/" + step_name(step) + ".tmp";
}

std::string CheckpointDir::commit(int64_t step, const TrainerState& state, int keep) const {
  const std::string staging = staging_folder(step);
  nlohmann::json files = nlohmann::json::object();
  for (const auto& entry : fs::directory_iterator(staging)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name == "trainer_state.json") continue;
    fsync_path(entry.path().string());
    files[name] = file_checksum(entry.path().string());
  }
  nlohmann::json j = {{"format", "ddx-checkpoint"}, {"version", 1}, {"step", state.step},
                      {"epoch", state.epoch}, {"step_in_epoch", state.step_in_epoch},
                      {"rng_state", state.rng_state}, {"config", state.config}, {"files", files}};
  write_file_atomically(staging + "/trainer_state.json", j.dump(2) + "\n");
  fsync_path(staging);
  const std::string final_path = root_ + "/" + step_name(step);
  std::error_code ec;
  fs::remove_all(final_path, ec);  // a checkpoint of the same step from an interrupted run
  fs::rename(staging, final_path);
  fsync_path(root_);
  auto all = complete_checkpoints(root_);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove_all(all[i], ec);
  return final_path;
}

std::optional<std::string> CheckpointDir::latest() const {
  auto all = complete_checkpoints(root_);
  if (all.empty()) return std::nullopt;
  return all.back().string();
}

std::optional<std::pair<std::string, TrainerState>> CheckpointDir::latest_valid(
    const nlohmann::json& expected_config, const std::function<void(const std::string&)>& warn,
    bool set_aside_corrupt) const {
  const auto all = complete_checkpoints(root_);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return std::make_pair(it->string(), verify(it->string(), expected_config));
    } catch (const CorruptCheckpoint& e) {
      events::Event corrupt("checkpoint.corrupt");
      corrupt.text("folder", it->string()).number("step", step_of_folder(*it));
      // With nothing valid left, starting afresh would overwrite the bad checkpoints (evidence
      // the user may want) and silently redo the run: refuse instead, naming the file.
      if (std::next(it) == all.rend()) {
        corrupt.emit();
        throw UsageError(std::string(e.what()) + "; no valid checkpoint to resume from (use another "
                         "--experiment-name to start afresh)");
      }
      // Left under its step_<N> name, it would count as one of the --keep-checkpoints newest
      // and rotation would delete good ones before it.
      const std::string set_aside_as = set_aside_corrupt ? set_aside(*it) : "";
      if (!set_aside_as.empty()) corrupt.text("set_aside", set_aside_as);
      corrupt.emit();
      warn(std::string(e.what()) + (set_aside_as.empty() ? "" : "; " + set_aside_as) +
           "; falling back to the previous checkpoint");
    }
  }
  return std::nullopt;
}

TrainerState CheckpointDir::verify(const std::string& folder, const nlohmann::json& expected) const {
  const std::string state_path = folder + "/trainer_state.json";
  std::ifstream in(state_path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw CorruptCheckpoint("checkpoint " + folder + " is corrupt: trainer_state.json does not parse (" + e.what() + ")");
  }
  if (j.value("format", "") != "ddx-checkpoint") {
    throw UsageError("checkpoint " + folder + " is not a ddx checkpoint (trainer_state.json has no format)");
  }
  for (const auto& [name, sum] : j.at("files").items()) {
    const std::string path = folder + "/" + name;
    if (!fs::exists(path)) throw CorruptCheckpoint("checkpoint " + folder + " is missing " + name);
    std::string actual;
    try {
      actual = file_checksum(path);
    } catch (const std::runtime_error&) {
      // Gone since the check above: rank 0 set this (corrupt) checkpoint aside meanwhile.
      if (!fs::exists(path)) throw CorruptCheckpoint("checkpoint " + folder + " is missing " + name);
      throw;
    }
    if (actual != sum.get<std::string>()) {
      throw CorruptCheckpoint("checkpoint " + folder + " is corrupt: " + name + " has checksum " + actual +
                       ", expected " + sum.get<std::string>());
    }
  }
  const nlohmann::json& stored = j.at("config");
  for (const auto& [key, value] : expected.items()) {
    if (!stored.contains(key) || stored.at(key) != value) {
      throw UsageError("checkpoint " + folder + " does not match this run: " + key + " was " +
                       (stored.contains(key) ? stored.at(key).dump() : std::string("absent")) + ", now " +
                       value.dump() + " (use another --experiment-name to start afresh)");
    }
  }
  TrainerState s;
  s.step = j.at("step").get<int64_t>();
  s.epoch = j.at("epoch").get<int64_t>();
  s.step_in_epoch = j.at("step_in_epoch").get<int64_t>();
  s.rng_state = j.at("rng_state").get<std::string>();
  s.config = stored;
  return s;
}

}  // namespace ddx::train
