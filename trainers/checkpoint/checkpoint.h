#pragma once
// Checkpoints of a run: <experiment>/checkpoints/step_<N>/ holding the strategy's files
// (model.safetensors, optimizer.safetensors, or shards) and trainer_state.json (step, data
// position, RNG, the configuration that must match on resume, and a checksum of every file).
// A checkpoint folder is written under a temporary name and renamed when complete, so a crash
// never leaves a half-written checkpoint that looks valid; the last K are kept.
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ddx/errors/errors.h"

namespace ddx::train {

// A checkpoint whose files do not match their checksums, are missing, or whose state does not
// parse: the previous checkpoint may still be good (a config mismatch is a plain UsageError).
class CorruptCheckpoint : public UsageError {
 public:
  using UsageError::UsageError;
};

struct TrainerState {
  int64_t step = 0;               // optimizer steps completed
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  std::string rng_state;          // torch default CPU generator state, hex
  nlohmann::json config;          // what must match on resume (model hash, seq length, ...)
};

class CheckpointDir {
 public:
  explicit CheckpointDir(std::string experiment_dir);

  // Folder for a new checkpoint at `step`: "<...>/step_<N>.tmp". Rank 0 creates it.
  std::string staging_folder(int64_t step) const;
  // Rank 0, after every rank has written its files into the staging folder: writes
  // trainer_state.json with checksums of every file, renames the folder into place, prunes to
  // `keep` checkpoints. Returns the final folder.
  std::string commit(int64_t step, const TrainerState& state, int keep) const;

  // The newest complete checkpoint, if any.
  std::optional<std::string> latest() const;
  // The newest checkpoint that verifies, with its state: a corrupt one (CorruptCheckpoint) is
  // passed to `warn` and the one before it tried; nullopt when none is complete. With
  // `set_aside_corrupt` (rank 0 only: one process renames) a corrupt one with a valid one before
  // it is renamed <folder>.corrupt, so neither a later resume nor --keep-checkpoints' rotation
  // counts it. When no valid one is left, throws UsageError and renames nothing (the run is
  // refused, the evidence stays where it was). A config mismatch still throws.
  std::optional<std::pair<std::string, TrainerState>> latest_valid(
      const nlohmann::json& expected_config, const std::function<void(const std::string&)>& warn,
      bool set_aside_corrupt) const;
  // Reads and verifies a checkpoint: trainer_state.json parses, every listed file exists
  // with its checksum, and `expected_config` equals the stored one field by field. Throws
  // CorruptCheckpoint or UsageError naming the checkpoint and the mismatch.
  TrainerState verify(const std::string& folder, const nlohmann::json& expected_config) const;

 private:
  std::string root_;  // <experiment>/checkpoints
};

}  // namespace ddx::train
