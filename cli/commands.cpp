// Every subcommand of `ddx`, registered in one place: the order here is the order of --help.
#include "cli/commands.h"

#include "analyzer/analyze_command.h"
#include "launcher/launch_command.h"
#ifdef DDX_WITH_TORCH
#include "harness/fault_matrix/matrix_command.h"
#include "harness/parity/compare_command.h"
#include "harness/parity/parity_command.h"
#include "harness/validate/validate_command.h"
#include "probes/bandwidth/torch/bandwidth_command.h"
#include "probes/buserror/buserror_command.h"
#include "probes/doctor/doctor_command.h"
#include "probes/gpu/gpu_health_command.h"
#include "probes/hang/hang_command.h"
#include "probes/health/health_command.h"
#include "probes/node/node_probe_commands.h"
#include "probes/selfcheck/selfcheck_command.h"
#include "top/top_command.h"
#include "trainers/checkpoint/checkpoint_command.h"
#include "trainers/train/train_command.h"
#endif

namespace ddx::cli {

std::vector<Subcommand> register_commands(CLI::App& app) {
  std::vector<Subcommand> commands;
  commands.push_back(add_launch_command(app));
  commands.push_back(add_version_command(app));
  commands.push_back(add_analyze_command(app));
#ifdef DDX_WITH_TORCH
  commands.push_back(add_train_command(app));
  commands.push_back(add_parity_command(app));
  commands.push_back(add_compare_command(app));
  commands.push_back(add_checkpoint_command(app));
  commands.push_back(add_doctor_command(app));
  commands.push_back(add_validate_command(app));
  commands.push_back(add_top_command(app));
  // `ddx health fleet` before `ddx health`: the first parsed command in this list runs.
  const Subcommand health = add_health_command(app);
  commands.push_back(add_health_fleet_command(*health.first));
  commands.push_back(health);
  CLI::App* probe = app.add_subcommand("probe", "Probes of the cluster: selfcheck, hang, bandwidth, buserror, compute, memory, gpu-health");
  probe->require_subcommand(1);
  commands.push_back(add_selfcheck_command(*probe));
  commands.push_back(add_hang_command(*probe));
  commands.push_back(add_bandwidth_command(*probe));
  commands.push_back(add_buserror_command(*probe));
  commands.push_back(add_compute_command(*probe));
  commands.push_back(add_memory_command(*probe));
  commands.push_back(add_gpu_health_command(*probe));
  CLI::App* fault = app.add_subcommand("fault", "Fault injection: the fault matrix");
  fault->require_subcommand(1);
  commands.push_back(add_fault_matrix_command(*fault));
#endif
  return commands;
}

}  // namespace ddx::cli
