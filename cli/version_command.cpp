// `ddx version`: every component's version, one per line, for bug reports.
#include <cstdio>

#include "cli/commands.h"
#include "ddx/version.h"

namespace ddx::cli {

namespace {
std::vector<std::pair<std::string, std::string>> all_versions() {
  auto report = version_report();
#ifdef DDX_WITH_TORCH
  auto torch = torch_versions();
  report.insert(report.begin() + 1, torch.begin(), torch.end());
#else
  report.insert(report.begin() + 1, {"libtorch", "not built in"});
#endif
  return report;
}
}  // namespace

std::string version_line() {
#ifdef DDX_WITH_TORCH
  return std::string("ddx ") + ddx_version() + " (libtorch " + DDX_TORCH_VERSION + ")";
#else
  return std::string("ddx ") + ddx_version();
#endif
}

Subcommand add_version_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version", "Print ddx, LibTorch, CUDA, NCCL, MPI and compiler versions");
  return {cmd, []() {
            for (const auto& [name, version] : all_versions()) {
              std::printf("%-13s %s\n", name.c_str(), version.c_str());
            }
            return 0;
          }};
}

}  // namespace ddx::cli
