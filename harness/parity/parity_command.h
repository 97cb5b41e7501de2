#pragma once
// `ddx parity`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_parity_command(CLI::App& app);

}  // namespace ddx::cli
