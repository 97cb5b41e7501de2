#pragma once
// `ddx probe bandwidth`: its entry point, registered by cli/commands.cpp under `ddx probe`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_bandwidth_command(CLI::App& probe);

}  // namespace ddx::cli
