#pragma once
// Every subcommand of the front end, registered in one place (commands.cpp).
#include <string>
#include <vector>

#include "cli/subcommand.h"

namespace ddx::cli {

// Adds every subcommand (and nested ones such as `probe selfcheck`) to `app`.
std::vector<Subcommand> register_commands(CLI::App& app);

// "ddx 0.1.0" plus the LibTorch version when linked.
std::string version_line();

// Subcommands, one function each, defined next to the code they run.
Subcommand add_launch_command(CLI::App& app);   // launcher/launch_command.cpp
Subcommand add_version_command(CLI::App& app);  // cli/version_command.cpp
Subcommand add_analyze_command(CLI::App& app);  // analyzer/analyze_command.cpp
#ifdef DDX_WITH_TORCH
Subcommand add_selfcheck_command(CLI::App& probe);  // probes/selfcheck/selfcheck_command.cpp
Subcommand add_hang_command(CLI::App& probe);       // probes/hang/hang_command.cpp
Subcommand add_bandwidth_command(CLI::App& probe);  // probes/bandwidth/torch/bandwidth_command.cpp
Subcommand add_buserror_command(CLI::App& probe);   // probes/buserror/buserror_command.cpp
Subcommand add_compute_command(CLI::App& probe);    // probes/node/compute_probe.cpp
Subcommand add_memory_command(CLI::App& probe);     // probes/node/memory_probe.cpp
Subcommand add_gpu_health_command(CLI::App& probe); // probes/gpu/gpu_health_command.cpp
Subcommand add_train_command(CLI::App& app);        // trainers/train/train_command.cpp
Subcommand add_parity_command(CLI::App& app);       // harness/parity/parity_command.cpp
Subcommand add_compare_command(CLI::App& app);      // harness/parity/compare_command.cpp
Subcommand add_checkpoint_command(CLI::App& app);   // trainers/checkpoint/checkpoint_command.cpp
Subcommand add_doctor_command(CLI::App& app);       // probes/doctor/doctor_command.cpp
Subcommand add_validate_command(CLI::App& app);     // harness/validate/validate_command.cpp
Subcommand add_top_command(CLI::App& app);          // top/top_command.cpp
Subcommand add_fault_matrix_command(CLI::App& fault);  // harness/fault_matrix/matrix_command.cpp
#endif

}  // namespace ddx::cli
