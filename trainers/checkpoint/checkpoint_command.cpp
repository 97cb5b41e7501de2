// `ddx checkpoint consolidate`: a sharded (FSDP, TP or 2D) checkpoint -> one full Hugging Face-style
// model (config.json + model.safetensors) that `ddx train --init-from`, transformers or any
// safetensors reader loads. Runs on one process; reads each shard by byte range.
#include <filesystem>
#include <iostream>
#include <memory>

#include "checkpoint/checkpoint_command.h"
#include "checkpoint/sharded_checkpoint.h"
#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "models/hf_checkpoint.h"
#include "models/model_config.h"
#include "models/safetensors.h"

namespace ddx::cli {
namespace {

namespace fs = std::filesystem;

struct ConsolidateOptions {
  std::string checkpoint;
  std::string out;
};

int consolidate(const ConsolidateOptions& o) {
  if (!fs::exists(o.checkpoint)) throw UsageError("checkpoint " + o.checkpoint + " does not exist");
  if (!fs::is_directory(o.checkpoint)) throw UsageError("checkpoint " + o.checkpoint + " is not a folder");
  const fs::path config_path = fs::path(o.checkpoint) / "config.json";
  if (!fs::exists(config_path))
    throw UsageError("checkpoint " + o.checkpoint + " has no config.json (not written by ddx train --strategy fsdp, tp or 2d?)");
  const models::ModelConfig config = models::model_config_from_hf_json(config_path.string());
  auto reader = train::CheckpointRows::open(o.checkpoint, {}, /*verify_checksums=*/true);

  const fs::path out_model = fs::path(o.out) / "model.safetensors";
  if (fs::exists(out_model)) throw UsageError("--out " + o.out + " already holds a model.safetensors; choose another folder");
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  int64_t elements = 0;
  for (const auto& [name, shape] : reader->parameters()) {
    models::HfTensorName hf;
    try {
      hf = models::hf_name(config, name);
    } catch (const std::invalid_argument& e) {
      throw UsageError("checkpoint " + o.checkpoint + ": " + e.what());
    }
    torch::Tensor full = reader->rows(name, 0, shape[0]);
    elements += full.numel();
    tensors.emplace_back(hf.name, hf.transposed ? full.t().contiguous() : full);
  }
  fs::create_directories(o.out);
  // transformers refuses safetensors files without format metadata.
  models::write_safetensors(out_model.string(), tensors, {{"format", "pt"}});
  write_file_atomically((fs::path(o.out) / "config.json").string(), models::to_hf_config_json(config));
  std::cout << "consolidated " << tensors.size() << " tensors (" << elements << " parameters) from " << (reader->sharded() ? std::to_string(reader->world_size()) + " shards" : std::string("a full checkpoint"))
            << " into " << out_model.string() << "\n";
  return 0;
}

}  // namespace

Subcommand add_checkpoint_command(CLI::App& app) {
  CLI::App* group = app.add_subcommand("checkpoint", "Work with training checkpoints");
  group->require_subcommand(1);
  auto options = std::make_shared<ConsolidateOptions>();
  CLI::App* cmd = group->add_subcommand(
      "consolidate",
      "Turn a sharded FSDP, TP or 2D checkpoint (at any world size) into one Hugging Face-style model folder\n"
      "  ddx checkpoint consolidate outputs/run1/checkpoints/step_000000500 -o gpt2-step500");
  cmd->add_option("checkpoint", options->checkpoint, "Checkpoint folder (holds fsdp_index.json)")->required();
  cmd->add_option("-o,--out", options->out, "Output folder for config.json and model.safetensors")->required();
  return {cmd, [options]() {
            check_output_folder("-o/--out", options->out);  // before the shards are read
            return consolidate(*options);
          }};
}

}  // namespace ddx::cli
