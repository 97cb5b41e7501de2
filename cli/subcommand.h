#pragma once
// How a subcommand plugs into the `ddx` front end: it adds itself (flags and help) to a parent
// CLI11 app and returns what runs it once the command line has been parsed.
#include <CLI/CLI.hpp>

#include <functional>
#include <utility>

namespace ddx::cli {

// Runs a parsed subcommand; returns the process exit code.
using Runner = std::function<int()>;
using Subcommand = std::pair<CLI::App*, Runner>;

}  // namespace ddx::cli
