#pragma once
// `ddx launch`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_launch_command(CLI::App& app);

}  // namespace ddx::cli
