// What each launcher's variables say about this process. Only reading and parsing happens here;
// flags, defaults and consistency checks are applied afterwards, in rendezvous.cpp.
#include <climits>

#include "ddx/errors/errors.h"
#include "rendezvous_draft.h"

namespace ddx::rendezvous_detail {

void read_int(const EnvMap& env, const std::string& key, Field& field) {
  if (const auto text = env_get(env, key)) field.set(parse_int(key, *text, INT_MIN, INT_MAX), key);
}

std::optional<std::pair<std::string, std::string>> first_set(
    const EnvMap& env, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (const auto value = env_get(env, key)) return std::make_pair(std::string(key), *value);
  }
  return std::nullopt;
}

namespace {

// MASTER_ADDR / MASTER_PORT as torchrun, mpirun -x and sbatch scripts export them.
void read_master_vars(const EnvMap& env, Draft& d) {
  if (const auto addr = env_get(env, "MASTER_ADDR")) {
    if (addr->empty()) throw UsageError("MASTER_ADDR is set but empty");
    d.master_addr = *addr;
    d.master_addr_origin = "MASTER_ADDR";
  }
  read_int(env, "MASTER_PORT", d.master_port);
}

// Open MPI and MPICH share everything but the variable names.
Draft read_mpi(const EnvMap& env, RendezvousSource source, const char* rank, const char* size,
               const char* local_rank, const char* local_size, const char* node_rank) {
  Draft d;
  d.source = source;
  d.rank_key = rank;
  d.world_key = size;
  read_int(env, rank, d.rank);
  read_int(env, size, d.world_size);
  read_int(env, local_rank, d.local_rank);
  read_int(env, local_size, d.local_world_size);
  if (node_rank != nullptr) read_int(env, node_rank, d.node_rank);
  read_master_vars(env, d);
  d.mpi_capable = true;
  // mpirun inside an allocation: the job id is the most useful name for the run.
  if (const auto job = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"})) d.run_id = job->second;
  return d;
}

}  // namespace

Draft read_single_process(const EnvMap& env) {
  Draft d;
  read_master_vars(env, d);  // honoured so that flags-only runs can take the endpoint from env
  return d;
}

Draft read_torchrun(const EnvMap& env, bool via_ddx_launch) {
  Draft d;
  d.source = via_ddx_launch ? RendezvousSource::DdxLaunch : RendezvousSource::Torchrun;
  d.rank_key = "RANK";
  d.world_key = "WORLD_SIZE";
  read_int(env, "RANK", d.rank);
  read_int(env, "WORLD_SIZE", d.world_size);
  read_int(env, "LOCAL_RANK", d.local_rank);
  read_int(env, "LOCAL_WORLD_SIZE", d.local_world_size);
  read_int(env, "GROUP_RANK", d.node_rank);
  read_int(env, "GROUP_WORLD_SIZE", d.num_nodes_fallback);
  read_master_vars(env, d);
  // ddx launch exports MASTER_PORT=0 to mean "rank 0 picks"; torchrun always passes a real port.
  d.zero_port_allowed = via_ddx_launch;
  if (const auto restarts = env_get(env, "TORCHELASTIC_RESTART_COUNT")) {
    d.restart_count = static_cast<int>(parse_int("TORCHELASTIC_RESTART_COUNT", *restarts, 0, INT_MAX));
  }
  d.run_id = env_get(env, "TORCHELASTIC_RUN_ID").value_or("");
  return d;
}

Draft read_open_mpi(const EnvMap& env) {
  return read_mpi(env, RendezvousSource::OpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                  "OMPI_COMM_WORLD_NODE_RANK");
}

Draft read_mpich(const EnvMap& env) {
  return read_mpi(env, RendezvousSource::Mpich, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                  "MPI_LOCALNRANKS", nullptr);
}

Draft read_slurm(const EnvMap& env) {
  Draft d;
  d.source = RendezvousSource::Slurm;
  d.rank_key = "SLURM_PROCID";
  d.world_key = "SLURM_NTASKS";
  read_int(env, "SLURM_PROCID", d.rank);
  if (const auto ntasks = first_set(env, {"SLURM_NTASKS", "SLURM_NPROCS"})) {
    d.world_size.set(parse_int(ntasks->first, ntasks->second, INT_MIN, INT_MAX), ntasks->first);
  }
  read_int(env, "SLURM_LOCALID", d.local_rank);
  read_int(env, "SLURM_NODEID", d.node_rank);

  // srun sets the STEP_ variants for the step it launched, which may use fewer nodes than the
  // job; SLURM_PROCID / NODEID / LOCALID count within the step, so the step's layout wins.
  std::vector<std::string> hosts;
  if (const auto list = first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    try {
      hosts = expand_slurm_nodelist(list->second);
    } catch (const UsageError& e) {
      throw UsageError(list->first + ": " + e.what());
    }
    d.num_nodes.set(static_cast<long long>(hosts.size()), list->first + "=" + list->second, false);
  } else if (const auto nodes = first_set(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"})) {
    d.num_nodes.set(parse_int(nodes->first, nodes->second, INT_MIN, INT_MAX), nodes->first);
  }

  if (const auto tpn = first_set(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    std::vector<int> tasks;
    try {
      tasks = expand_slurm_tasks_per_node(tpn->second);
    } catch (const UsageError& e) {
      throw UsageError(tpn->first + ": " + e.what());
    }
    const long long node = d.node_rank.value.value_or(0);
    const std::string spec = tpn->first + "=" + tpn->second;
    if (node < 0 || node >= static_cast<long long>(tasks.size())) {
      throw UsageError("SLURM_NODEID=" + std::to_string(node) + " is outside 0.." +
                       std::to_string(tasks.size() - 1) + " (" + spec + " lists " +
                       std::to_string(tasks.size()) + " nodes)");
    }
    d.local_world_size.set(tasks[node], spec + " for node " + std::to_string(node), false);
  }

  if (const auto addr = env_get(env, "MASTER_ADDR")) {
    if (addr->empty()) throw UsageError("MASTER_ADDR is set but empty");
    d.master_addr = *addr;
    d.master_addr_origin = "MASTER_ADDR";
  } else if (!hosts.empty()) {
    d.master_addr = hosts.front();
    d.master_addr_origin = "the first host of the node list";
  } else {
    d.missing_addr_hint = "SLURM_JOB_NODELIST and MASTER_ADDR are both unset";
  }

  const auto job = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (job) d.run_id = job->second;
  if (env_get(env, "MASTER_PORT")) {
    read_int(env, "MASTER_PORT", d.master_port);
  } else if (job) {
    try {
      d.master_port.set(slurm_master_port(job->second),
                        job->first + "=" + job->second + " (5000 + its last 4 digits)", false);
    } catch (const UsageError&) {
      throw UsageError(job->first + "='" + job->second + "' is not a job number");
    }
  } else {
    d.missing_port_hint = "SLURM_JOB_ID and MASTER_PORT are both unset";
  }
  return d;
}

}  // namespace ddx::rendezvous_detail
