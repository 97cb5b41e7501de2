#pragma once
// `ddx probe compute` and `ddx probe memory`: their entry points, registered by cli/commands.cpp
// under `ddx probe`.
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_compute_command(CLI::App& probe);  // probes/node/compute_probe.cpp
Subcommand add_memory_command(CLI::App& probe);   // probes/node/memory_probe.cpp

}  // namespace ddx::cli
