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
// subcommand named in `args`, or one around it, declared another (ddx/errors/usage_exit_code.h).
int usage_exit_code(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace ddx::cli
