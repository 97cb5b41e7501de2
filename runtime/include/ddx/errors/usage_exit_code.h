#pragma once
// The exit code a subcommand's bad input gets, when it is not ddx::kExitUsage (2). The command
// declares it where it adds itself; the front end (cli/usage_errors.h) looks it up for the
// innermost subcommand on the command line, or one around it. `ddx health` sets 3 (UNKNOWN):
// its exit code is a Nagios state, where 2 means CRITICAL and drains a node, and a mistyped
// flag must never drain a fleet. Keyed by the CLI11 app, which is only named here, so the
// runtime does not need CLI11.
#include <optional>

namespace CLI {
class App;
}  // namespace CLI

namespace ddx::cli {

void set_usage_exit_code(const CLI::App& subcommand, int code);

// What set_usage_exit_code declared for `subcommand` itself; nullopt when nothing was.
std::optional<int> declared_usage_exit_code(const CLI::App& subcommand);

}  // namespace ddx::cli
