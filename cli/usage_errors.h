#pragma once
// What the front end says when the command line does not parse: one line that names the
// unknown flag or subcommand, suggests the nearest valid spelling and points to the
// subcommand's own --help. One place for every subcommand: they only declare their flags.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace ddx::cli {

// The message for `error`, thrown while `app` parsed `args` (argv without the program name).
// Without the "ddx: error: " prefix.
std::string describe_parse_error(const CLI::App& app, const std::vector<std::string>& args,
                                 const CLI::ParseError& error);

// The exit code bad input to a command gets: ddx::kExitUsage (2), unless the innermost
// subcommand named in `args`, or one around it, set another. `ddx health` sets 3 (UNKNOWN):
// its exit code is a Nagios state, where 2 means CRITICAL and drains a node, and a mistyped
// flag must never drain a fleet.
void set_usage_exit_code(const CLI::App& subcommand, int code);
int usage_exit_code(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace ddx::cli
