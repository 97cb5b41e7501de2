#pragma once
// `ddx fault matrix`: its entry point, registered by cli/commands.cpp under `ddx fault`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_fault_matrix_command(CLI::App& fault);

}  // namespace ddx::cli
