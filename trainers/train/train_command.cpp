// `ddx train` on the command line.
#include <memory>

#include "cli/commands.h"
#include "train/strategy.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace ddx::cli {

Subcommand add_train_command(CLI::App& app) {
  auto options = std::make_shared<train::TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a GPT-2 or Llama-style model with a parallel strategy (" + train::strategy_names() +
          "). With no flags: a " + std::to_string(train::kDemoSteps) +
          "-step demo of the debug model on the built-in corpus, on one process.\n"
          "  ddx train -e run1 -m debug --max-steps 100\n"
          "  ddx launch -np 4 -- ddx train --strategy ddp -e run1");
  train::add_train_flags(*cmd, *options);
  return {cmd, [cmd, options]() {
            train::finish_train_flags(*cmd, *options);
            return train::run_training(*options);
          }};
}

}  // namespace ddx::cli
