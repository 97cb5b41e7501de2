// `ddx train` on the command line.
#include <memory>

#include "strategies/strategy_registry.h"
#include "train/train_command.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace ddx::cli {

Subcommand add_train_command(CLI::App& app) {
  auto options = std::make_shared<train::TrainOptions>();
  auto profile = std::make_shared<train::ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a GPT-2 or Llama-style model with a parallel strategy (" + train::strategy_names() +
          "). With no flags: a " + std::to_string(train::kDemoSteps) +
          "-step demo of the debug model on the built-in corpus, on one process.\n"
          "  ddx train -e run1 -m debug --max-steps 100\n"
          "  ddx launch -np 4 -- ddx train --strategy ddp -e run1");
  train::add_train_flags(*cmd, *options);
  cmd->add_option("--profile", profile->target,
                  "Profile --profile-steps steps with LibTorch's profiler: a per-phase and per-op table and a "
                  "Chrome trace, into this folder (or this .json trace file) (docs/performance.md)");
  cmd->add_option("--profile-steps", profile->steps, "Steps --profile records (after the first)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))->capture_default_str();
  return {cmd, [cmd, options, profile]() {
            train::finish_train_flags(*cmd, *options);
            if (cmd->count("--profile") > 0) train::check_profile_target(profile->target);  // given empty: an error too
            return train::run_training(*options, *profile);
          }};
}

}  // namespace ddx::cli
