#pragma once
// How a subcommand plugs into the `ddx` front end: it adds itself (flags and help) to a parent
// CLI11 app and returns what runs it once the command line has been parsed. It lives here, below
// every command folder, so that a command declares itself without including the front end (cli/);
// only targets that link CLI11 include it.
#include <CLI/CLI.hpp>

#include <functional>
#include <utility>

#include "ddx/errors/usage_exit_code.h"

namespace ddx::cli {

// Runs a parsed subcommand; returns the process exit code.
using Runner = std::function<int()>;
using Subcommand = std::pair<CLI::App*, Runner>;

}  // namespace ddx::cli
