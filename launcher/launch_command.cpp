// `ddx launch`: torchrun's job (N local workers with torchrun's environment, supervision,
// restarts, a failure report) for any command, without Python.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/processes/shm_namespace.h"
#include "launcher/launch_command.h"
#include "launcher/launch_options.h"
#include "launcher/supervisor.h"

namespace ddx::cli {
namespace {

struct LaunchFlags {
  launcher::LaunchOptions options;
  bool np_marker = false;
};

}  // namespace

Subcommand add_launch_command(CLI::App& app) {
  auto flags = std::make_shared<LaunchFlags>();
  launcher::LaunchOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Run a command as N local workers with torchrun's environment (RANK, WORLD_SIZE, "
      "LOCAL_RANK, MASTER_ADDR, ...), supervise them and report the first failure.\n"
      "  ddx launch -np 4 -- ./train --steps 100");
  // mpirun's `-np 4`: CLI11 reads "-np" as the short flags -n and -p, like `ls -la`, so -p is
  // the count and -n a hidden marker that is only accepted in front of it.
  cmd->add_option("-p,--nproc-per-node,--np", o.nproc_per_node,
                  "Workers on this node (also -np N, as with mpirun)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_flag("-n", flags->np_marker)->group("");
  cmd->add_option("--nnodes", o.nnodes, "Number of nodes")->capture_default_str();
  cmd->add_option("--node-rank", o.node_rank, "This node's rank in [0, nnodes)")->capture_default_str();
  cmd->add_option("--master-addr", o.master_addr, "Address of rank 0's host")->capture_default_str();
  cmd->add_option("--master-port", o.master_port,
                  "Port of the rendezvous store on the master; 0 picks a free port (one node only)")
      ->capture_default_str();
  cmd->add_option("--log-dir", o.log_dir,
                  "Write each rank's output to <dir>/attempt_<k>/rank_<N>/{stdout,stderr}.log "
                  "instead of the console");
  cmd->add_flag("--tee", o.tee, "With --log-dir: also print the output on the console");
  cmd->add_option("--max-restarts", o.max_restarts,
                  "Restart the whole group up to K times after a failure")
      ->capture_default_str();
  cmd->add_option("--monitor-interval", o.monitor_interval_s,
                  "Seconds between checks of the workers (exits are noticed at once anyway)")
      ->capture_default_str();
  cmd->add_option("--grace-period", o.grace_period_s,
                  "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  cmd->add_option("--run-id", o.run_id, "TORCHELASTIC_RUN_ID for the workers (default: time and pid; with --nnodes > 1, the master address and port, the same on every node)");
  cmd->add_option("--shm-size", o.shm_size,
                  "Give the workers a private /dev/shm of this size (bytes, or with a K, M or G suffix: 64M, 1G), as docker run --shm-size "
                  "does: a tmpfs in a mount namespace of this job, the node's own untouched (needs root)")
      ->type_name("SIZE");
  cmd->add_option("command", o.command, "The command to run and its arguments, after --");

  Runner run = [flags, cmd]() {
    if (flags->np_marker && cmd->count("-p") == 0) {
      throw UsageError("ddx launch: -n is not a flag; use -np N or --nproc-per-node N");
    }
    // Under srun with none of the node flags: the step says how many nodes and who is master.
    const bool nodes_given = cmd->count("--nnodes") + cmd->count("--node-rank") + cmd->count("--master-addr") +
                             cmd->count("--master-port") > 0;
    if (auto step = nodes_given ? std::nullopt : slurm_step_nodes(current_env(), "ddx launch")) {
      launcher::LaunchOptions& o = flags->options;
      o.nnodes = step->nnodes;
      o.node_rank = step->node_rank;
      o.master_addr = step->master_addr;
      o.master_port = step->master_port;
      std::fprintf(stderr, "%s\n", step->said.c_str());
    }
    launcher::validate(flags->options);
    const std::string& size = flags->options.shm_size;
    // Before run_supervised starts a thread: the namespace is this thread's, and the workers'.
    if (flags->options.shm_bytes > 0) {
      if (const std::string why = shm::shrink_dev_shm(flags->options.shm_bytes); !why.empty()) {
        throw UsageError("ddx launch: --shm-size " + size + ": no private /dev/shm for the workers (" + why +
                         "); it needs root (CAP_SYS_ADMIN) for a mount namespace");
      }
      std::fprintf(stderr, "ddx launch: the workers' /dev/shm is a private tmpfs of %s (this node's own is untouched)\n",
                   size.c_str());
    }
    return launcher::run_supervised(flags->options);
  };
  return {cmd, run};
}

}  // namespace ddx::cli
