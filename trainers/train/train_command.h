#pragma once
// `ddx train`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_train_command(CLI::App& app);

}  // namespace ddx::cli
