#pragma once
// `ddx doctor`: its entry point, registered by cli/commands.cpp.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_doctor_command(CLI::App& app);

}  // namespace ddx::cli
