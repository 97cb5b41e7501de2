#pragma once
// `ddx analyze`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_analyze_command(CLI::App& app);

}  // namespace ddx::cli
