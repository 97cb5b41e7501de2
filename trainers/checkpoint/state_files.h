#pragma once
// Model and optimizer state as files, keyed by parameter name (never by pointer or position,
// so checkpoints survive code changes and any world size can load them):
//   model.safetensors      <name>                         full parameters
//   optimizer.safetensors  <name>.exp_avg, <name>.exp_avg_sq, <name>.step (int64 scalar)
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "optim/adamw.h"

namespace ddx::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

void write_model_file(const std::string& path, const NamedTensors& parameters);
void write_optimizer_file(const std::string& path, const std::map<std::string, AdamWState>& state);

// Reads `path` into `parameters` (copying into the existing tensors). Every expected name must
// be present with the same shape and nothing else may be there; otherwise UsageError naming
// the checkpoint file and the tensor. Nothing is copied unless everything matches.
void read_model_file(const std::string& path, NamedTensors& parameters);

// Reads the optimizer state of the parameters in `like` (same names and shapes) onto `device`.
std::map<std::string, AdamWState> read_optimizer_file(const std::string& path,
                                                       const NamedTensors& like,
                                                       torch::Device device);

}  // namespace ddx::train
