#pragma once
// `ddx compare`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_compare_command(CLI::App& app);

}  // namespace ddx::cli
