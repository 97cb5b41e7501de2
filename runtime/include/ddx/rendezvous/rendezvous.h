#pragma once
// Where this process sits in the job (rank, world, node, master endpoint), read from whichever
// launcher started it. No LibTorch here: the launcher, the probes and the tests share it.
#include <optional>
#include <string>
#include <vector>

#include "ddx/processes/env.h"

namespace ddx {

// Who told us our rank. Checked in this order (first match wins), because outer launchers
// leave their variables behind for inner ones: explicit flags; ddx launch / torchrun (RANK);
// Open MPI (OMPI_COMM_WORLD_RANK); MPICH/Hydra (PMI_RANK); SLURM (SLURM_PROCID); otherwise a
// single process.
enum class RendezvousSource { Flags, DdxLaunch, Torchrun, OpenMpi, Mpich, Slurm, SingleProcess };

const char* to_string(RendezvousSource source);

// Values given on a command line; each one overrides what the environment says.
struct RendezvousFlags {
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<int> local_world_size;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

struct RendezvousInfo {
  RendezvousSource source = RendezvousSource::SingleProcess;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr = "127.0.0.1";
  // 0 means "not known from the environment": rank 0 picks a free port and, under an MPI
  // launcher, tells the others over MPI (see mpi_bootstrap).
  int master_port = 0;
  bool mpi_bootstrap = false;  // master endpoint must be agreed over MPI before the store
  int restart_count = 0;       // TORCHELASTIC_RESTART_COUNT
  std::string run_id;          // TORCHELASTIC_RUN_ID, SLURM_JOB_ID, ...
  std::string hostname;        // this host

  // One line for logs: "rank 3/8 (local 1/4, node 1/2) via SLURM, master gpu001:15123".
  std::string describe() const;
};

// Reads the rendezvous from `env` (and `flags`, which win). Throws UsageError with one line
// naming the culprit variable for: non-integer values, rank outside [0, world), local rank
// outside [0, local world), local world larger than world, a port outside 1..65535, a missing
// master address when world > 1 and nothing can derive it, malformed SLURM node lists.
//
// Details the launchers leave open:
// - Missing LOCAL_WORLD_SIZE (or MPI local size) means one node (local world = world); missing
//   local rank means rank % local world; missing node rank means rank / local world; the node
//   count is world / local world, else GROUP_WORLD_SIZE, else that quotient rounded up.
// - Port 0 means "rank 0 picks a free port". It is accepted from --master-port and from
//   MASTER_PORT under ddx launch, and only for world 1 or under an MPI launcher (rank 0 then
//   broadcasts it); torchrun, SLURM and MPI variables must carry a real port (1..65535).
// - Under Open MPI / MPICH with world > 1 and no complete MASTER_ADDR + MASTER_PORT (from env
//   or flags), mpi_bootstrap is set, master_addr is empty and master_port 0.
// - SLURM: MASTER_ADDR, else the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST /
//   SLURM_NODELIST; MASTER_PORT, else slurm_master_port(SLURM_JOB_ID). The step variables win
//   because srun's PROCID/NODEID/LOCALID count within the step, which may be a subset of the job.
// - Flags are applied after the environment is read, so a malformed variable is reported even
//   when a flag would have replaced it.
RendezvousInfo resolve_rendezvous(const EnvMap& env, const RendezvousFlags& flags = {});

// Expands a SLURM host list such as "gpu[001-004,010],cpu7" or "r[1-2]n[01-02]" into host
// names, keeping zero padding. Throws UsageError on unbalanced brackets or reversed ranges.
std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist);

// Tasks per node from SLURM_TASKS_PER_NODE's compressed form, e.g. "2(x3),1" -> {2,2,2,1}.
std::vector<int> expand_slurm_tasks_per_node(const std::string& spec);

// The master port convention of the guide's sbatch script: 5000 + the last 4 digits of the job id.
int slurm_master_port(const std::string& job_id);

// The nodes of a multi-node srun step that starts one task per node, for a program that then
// starts its node's ranks itself (`srun ddx launch`, as `srun torchrun`; `srun ddx fault
// matrix`): the step's node count, this task's node, the master (the step's first host) and
// port (MASTER_PORT, else slurm_master_port), and `said`, one line telling the user so.
struct SlurmStepNodes {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  std::string said;
};

// nullopt when `env` is not a task of an srun step over several nodes (SLURM_STEP_NUM_TASKS
// unset: a batch script's own shell; or already a worker of a launcher; or one node, where the
// program's own single-node defaults serve). Throws UsageError naming the variable when the
// step starts more than one task of `program` on a node, or its variables do not parse.
std::optional<SlurmStepNodes> slurm_step_nodes(const EnvMap& env, const std::string& program);

}  // namespace ddx
