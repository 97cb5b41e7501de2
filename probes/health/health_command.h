#pragma once
// `ddx health` and `ddx health fleet` (docs/health.md).
#include "ddx/subcommand.h"

namespace ddx::cli {

Subcommand add_health_command(CLI::App& app);   // probes/health/health_command.cpp
// `ddx health fleet`, under the health subcommand: probes/health/fleet_command.cpp
Subcommand add_health_fleet_command(CLI::App& health);

}  // namespace ddx::cli
