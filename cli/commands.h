#pragma once
// The front end's list of subcommands (commands.cpp) and its own version line. Each command
// declares its entry point in a header of its own folder; commands.cpp includes them all.
#include <string>
#include <vector>

#include "ddx/subcommand.h"

namespace ddx::cli {

// Adds every subcommand (and nested ones such as `probe selfcheck`) to `app`.
std::vector<Subcommand> register_commands(CLI::App& app);

// "ddx 0.1.0" plus the LibTorch version when linked.
std::string version_line();

Subcommand add_version_command(CLI::App& app);  // cli/version_command.cpp

}  // namespace ddx::cli
