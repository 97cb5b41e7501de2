#pragma once
// `ddx validate`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_validate_command(CLI::App& app);

}  // namespace ddx::cli
