// `srun -N 2 --ntasks-per-node 1 ddx launch --nproc-per-node 8 -- ...`: the launcher (or the
// fault matrix) is the step's task on each node and takes the nodes from the step, so the user
// passes none of --nnodes, --node-rank, --master-addr, --master-port.
#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {

std::optional<SlurmStepNodes> slurm_step_nodes(const EnvMap& env, const std::string& program) {
  if (!env_get(env, "SLURM_STEP_NUM_TASKS") || !env_get(env, "SLURM_PROCID")) return std::nullopt;
  if (env_get(env, "RANK") || env_get(env, "TORCHELASTIC_RUN_ID")) return std::nullopt;  // a launcher's worker
  // The step's tasks read as ranks, the same reading (and errors) as a rank srun started:
  // rank = node, local world = tasks of `program` on this node.
  const RendezvousInfo step = resolve_rendezvous(env);
  if (step.num_nodes < 2) return std::nullopt;
  if (step.local_world_size != 1) {
    const std::string spec = env_get(env, "SLURM_STEP_TASKS_PER_NODE").value_or("?");
    throw UsageError(program + ": SLURM_STEP_TASKS_PER_NODE=" + spec + " starts " +
                     std::to_string(step.local_world_size) + " of it on node " + std::to_string(step.node_rank) +
                     "; start one per node (srun --ntasks-per-node 1), it starts the node's ranks itself");
  }
  SlurmStepNodes nodes;
  nodes.nnodes = step.num_nodes;
  nodes.node_rank = step.node_rank;
  nodes.master_addr = step.master_addr;
  nodes.master_port = step.master_port;
  nodes.said = program + ": node " + std::to_string(nodes.node_rank) + " of " + std::to_string(nodes.nnodes) +
               " of SLURM step " + env_get(env, "SLURM_JOB_ID").value_or("?") + "." +
               env_get(env, "SLURM_STEP_ID").value_or("?") + ", master " + nodes.master_addr + ":" +
               std::to_string(nodes.master_port) + " (from the step's node list and job id)";
  return nodes;
}

}  // namespace ddx
