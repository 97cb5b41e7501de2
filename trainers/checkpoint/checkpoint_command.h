#pragma once
// `ddx checkpoint`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_checkpoint_command(CLI::App& app);

}  // namespace ddx::cli
