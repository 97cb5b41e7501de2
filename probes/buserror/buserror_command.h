#pragma once
// `ddx probe buserror`: its entry point, registered by cli/commands.cpp under `ddx probe`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_buserror_command(CLI::App& probe);

}  // namespace ddx::cli
