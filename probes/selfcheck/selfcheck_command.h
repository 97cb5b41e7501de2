#pragma once
// `ddx probe selfcheck`: its entry point, registered by cli/commands.cpp under `ddx probe`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_selfcheck_command(CLI::App& probe);

}  // namespace ddx::cli
