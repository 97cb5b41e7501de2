#pragma once
// `ddx top`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_top_command(CLI::App& app);

}  // namespace ddx::cli
