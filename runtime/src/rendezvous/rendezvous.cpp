// Picks the launcher that started this process, applies command-line flags on top, fills the
// gaps launchers leave, and rejects impossible combinations before anything connects: a wrong
// rank or world size otherwise shows up much later as a rendezvous that never completes.
#include "ddx/rendezvous/rendezvous.h"

#include <unistd.h>


#include "ddx/errors/errors.h"
#include "rendezvous_draft.h"

namespace ddx {

using rendezvous_detail::Draft;
using rendezvous_detail::Field;

const char* to_string(RendezvousSource source) {
  switch (source) {
    case RendezvousSource::Flags: return "flags";
    case RendezvousSource::DdxLaunch: return "ddx launch";
    case RendezvousSource::Torchrun: return "torchrun";
    case RendezvousSource::OpenMpi: return "Open MPI";
    case RendezvousSource::Mpich: return "MPICH";
    case RendezvousSource::Slurm: return "SLURM";
    case RendezvousSource::SingleProcess: return "single process";
  }
  return "unknown";
}

std::string RendezvousInfo::describe() const {
  std::string master;
  if (mpi_bootstrap) {
    master = "agreed over MPI";
  } else {
    master = master_addr + ":" + (master_port == 0 ? std::string("<any free port>")
                                                   : std::to_string(master_port));
  }
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (local " +
         std::to_string(local_rank) + "/" + std::to_string(local_world_size) + ", node " +
         std::to_string(node_rank) + "/" + std::to_string(num_nodes) + ") via " +
         to_string(source) + ", master " + master;
}

namespace {

// "RANK=5" for a value read as is; "local world size 4 from SLURM_TASKS_PER_NODE=..." otherwise.
std::string culprit(const Field& f, const std::string& what) {
  const std::string value = std::to_string(*f.value);
  return f.direct ? f.origin + "=" + value : what + " " + value + " from " + f.origin;
}

// The other side of a comparison, e.g. "world size 4 from WORLD_SIZE".
std::string bound(const Field& f, const std::string& what) {
  return what + " " + std::to_string(*f.value) + " from " + f.origin;
}

void check_in_range(const Field& f, const std::string& what, const Field& limit,
                    const std::string& limit_what) {
  if (*f.value < 0 || *f.value >= *limit.value) {
    throw UsageError(culprit(f, what) + " is outside 0.." + std::to_string(*limit.value - 1) +
                     " (" + bound(limit, limit_what) + ")");
  }
}

void apply_flags(const RendezvousFlags& flags, Draft& d) {
  if (flags.rank) {
    d.rank.set(*flags.rank, "--rank");
    d.source = RendezvousSource::Flags;
  }
  if (flags.world_size) d.world_size.set(*flags.world_size, "--world-size");
  if (flags.local_rank) d.local_rank.set(*flags.local_rank, "--local-rank");
  if (flags.local_world_size) d.local_world_size.set(*flags.local_world_size, "--local-world-size");
  if (flags.master_addr) {
    if (flags.master_addr->empty()) throw UsageError("--master-addr is empty");
    d.master_addr = *flags.master_addr;
    d.master_addr_origin = "--master-addr";
  }
  if (flags.master_port) {
    d.master_port.set(*flags.master_port, "--master-port");
    d.zero_port_allowed = true;  // an explicit 0 asks rank 0 to pick a free port
  }
}

// Fills the values launchers may leave out, then checks that the whole makes sense.
RendezvousInfo finish(Draft d) {
  if (!d.world_size.value) {
    if (!d.world_key.empty()) throw UsageError(d.rank_key + " is set but " + d.world_key + " is not");
    d.world_size.set(1, "the default", false);
  }
  if (*d.world_size.value < 1) throw UsageError(culprit(d.world_size, "world size") + " must be at least 1");
  if (!d.rank.value) d.rank.set(0, "the default", false);
  check_in_range(d.rank, "rank", d.world_size, "world size");

  // Without a local world size, assume one node: that is what a hand-started job usually is.
  if (!d.local_world_size.value) d.local_world_size.set(*d.world_size.value, "the world size", false);
  if (*d.local_world_size.value < 1) {
    throw UsageError(culprit(d.local_world_size, "local world size") + " must be at least 1");
  }
  if (*d.local_world_size.value > *d.world_size.value) {
    throw UsageError(culprit(d.local_world_size, "local world size") + " is larger than " +
                     bound(d.world_size, "world size"));
  }
  // The guide's convention (rank % devices) holds when every node runs the same number of ranks.
  if (!d.local_rank.value) {
    d.local_rank.set(*d.rank.value % *d.local_world_size.value, "rank % local world size", false);
  }
  check_in_range(d.local_rank, "local rank", d.local_world_size, "local world size");

  if (!d.num_nodes.value) {
    const long long world = *d.world_size.value, local = *d.local_world_size.value;
    if (world % local == 0) {
      d.num_nodes.set(world / local, "world size / local world size", false);
    } else if (d.num_nodes_fallback.value) {
      d.num_nodes = d.num_nodes_fallback;
    } else {
      d.num_nodes.set((world + local - 1) / local, "world size / local world size, rounded up", false);
    }
  }
  if (*d.num_nodes.value < 1) throw UsageError(culprit(d.num_nodes, "node count") + " must be at least 1");
  if (!d.node_rank.value) {
    d.node_rank.set(*d.rank.value / *d.local_world_size.value, "rank / local world size", false);
  }
  check_in_range(d.node_rank, "node rank", d.num_nodes, "node count");

  RendezvousInfo info;
  info.source = d.source;
  info.rank = static_cast<int>(*d.rank.value);
  info.world_size = static_cast<int>(*d.world_size.value);
  info.local_rank = static_cast<int>(*d.local_rank.value);
  info.local_world_size = static_cast<int>(*d.local_world_size.value);
  info.node_rank = static_cast<int>(*d.node_rank.value);
  info.num_nodes = static_cast<int>(*d.num_nodes.value);
  info.restart_count = d.restart_count;
  info.run_id = d.run_id;

  if (d.master_port.value) {
    const long long lowest = d.zero_port_allowed ? 0 : 1;
    if (*d.master_port.value < lowest || *d.master_port.value > 65535) {
      throw UsageError(culprit(d.master_port, "master port") + " is outside " +
                       std::to_string(lowest) + "..65535");
    }
  }

  // Port 0 ("rank 0 picks") leaves the endpoint as unknown as no port at all.
  const bool endpoint_known = d.master_addr && d.master_port.value.value_or(0) != 0;
  if (info.world_size > 1 && !endpoint_known && d.mpi_capable) {
    // Rank 0 will pick its address and a free port and broadcast both over MPI.
    info.mpi_bootstrap = true;
    info.master_addr.clear();
    info.master_port = 0;
    return info;
  }
  if (info.world_size > 1 && !d.master_addr) {
    const std::string hint = d.missing_addr_hint.empty() ? "set MASTER_ADDR or pass --master-addr"
                                                         : d.missing_addr_hint;
    throw UsageError("no master address: " + hint + " (" + bound(d.world_size, "world size") + ")");
  }
  if (info.world_size > 1 && !d.master_port.value) {
    const std::string hint = d.missing_port_hint.empty() ? "set MASTER_PORT or pass --master-port"
                                                         : d.missing_port_hint;
    throw UsageError("no master port: " + hint + " (" + bound(d.world_size, "world size") + ")");
  }
  if (info.world_size > 1 && *d.master_port.value == 0) {
    // Only an MPI launcher can tell the other ranks which port rank 0 picked.
    throw UsageError(culprit(d.master_port, "master port") +
                     " (any free port) needs a single process or an MPI launcher (" +
                     bound(d.world_size, "world size") + ")");
  }
  if (d.master_addr) info.master_addr = *d.master_addr;
  info.master_port = static_cast<int>(d.master_port.value.value_or(0));
  return info;
}

std::string this_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

RendezvousInfo resolve_rendezvous(const EnvMap& env, const RendezvousFlags& flags) {
  using namespace rendezvous_detail;
  Draft draft;
  // The order matters: `srun torchrun` leaves SLURM_PROCID (the torchrun agent's) next to the
  // worker's RANK, and mpirun under SLURM does the same with OMPI_*; the innermost launcher wins.
  if (env_get(env, "RANK")) {
    draft = read_torchrun(env, env_get(env, "DDX_LAUNCH") == std::optional<std::string>("1"));
  } else if (env_get(env, "OMPI_COMM_WORLD_RANK")) {
    draft = read_open_mpi(env);
  } else if (env_get(env, "PMI_RANK")) {
    draft = read_mpich(env);
  } else if (env_get(env, "SLURM_PROCID") && (env_get(env, "SLURM_STEP_ID") || env_get(env, "SLURM_STEPID") ||
                                               env_get(env, "SLURM_STEP_NUM_TASKS"))) {
    // A task of an srun step. The batch script's own shell also has SLURM_PROCID=0 and the
    // job's SLURM_NTASKS, but no step: a command run there directly is one process, not rank 0
    // of a job whose other ranks will never come.
    draft = read_slurm(env);
  } else {
    draft = read_single_process(env);
  }
  apply_flags(flags, draft);
  RendezvousInfo info = finish(std::move(draft));
  info.hostname = this_hostname();
  return info;
}

}  // namespace ddx
