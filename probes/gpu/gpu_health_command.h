#pragma once
// `ddx probe gpu-health`: its entry point, registered by cli/commands.cpp under `ddx probe`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_gpu_health_command(CLI::App& probe);

}  // namespace ddx::cli
