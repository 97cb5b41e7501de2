// The `ddx` front end: one binary, one subcommand per job. Each subcommand lives with the code
// it drives (launcher/, probes/, ...) and declares its entry point in a header there;
// commands.cpp is the one list that registers them.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "ddx/processes/env.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/text/log.h"
#include "faults/faults.h"

namespace {

// At debug level (DDX_LOG_LEVEL=debug): the command line and the environment that decides how
// a distributed job behaves, so ranks' logs can be diffed when one misbehaves.
void log_startup(int argc, char** argv) {
  if (ddx::log::level() > ddx::log::Level::Debug) return;
  std::string args;
  for (int i = 0; i < argc; ++i) args += (i ? " " : "") + std::string(argv[i]);
  ddx::log::debug("args: ", args);
  static const char* prefixes[] = {"RANK", "WORLD_SIZE", "LOCAL_", "GROUP_", "ROLE_", "MASTER_",
                                   "TORCHELASTIC_", "SLURM_", "PMI_", "MPI_", "OMPI_", "NCCL_",
                                   "TORCH_", "GLOO_", "CUDA_", "OMP_", "DDX_"};
  for (const auto& [key, value] : ddx::current_env()) {
    for (const char* p : prefixes) {
      if (key.rfind(p, 0) == 0) {
        ddx::log::debug("env: ", key, "=", value);
        break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ddx::install_error_handlers();

  CLI::App app{"ddx: diagnostics and test harness for distributed training on LibTorch", "ddx"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ddx::cli::version_line());

  std::vector<ddx::cli::Subcommand> commands = ddx::cli::register_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the culprit, like every other bad input.
    const std::vector<std::string> args(argv + 1, argv + argc);
    const std::string message = ddx::cli::describe_parse_error(app, args, e);
    std::fprintf(stderr, "ddx: error: %s\n", message.c_str());
    ddx::events::Event("usage_error").text("message", message).emit();
    return ddx::cli::usage_exit_code(app, args);
  }

  // Only UsageError is caught: any other exception reaches the terminate handler with its
  // stack intact, which prints the trace and writes the error file.
  try {
    ddx::log::configure_from_env();
    // First, so a leaked DDX_FAULT or a --fault is on the first line of every log.
    ddx::faults::announce();
    ddx::events::check_file_variable();
    log_startup(argc, argv);
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) return run();
    }
  } catch (const ddx::UsageError& e) {
    std::fprintf(stderr, "ddx: error: %s\n", e.what());
    ddx::events::Event("usage_error").text("message", e.what()).emit();
    return ddx::cli::usage_exit_code(app, std::vector<std::string>(argv + 1, argv + argc));
  }
  return ddx::kExitUsage;
}
