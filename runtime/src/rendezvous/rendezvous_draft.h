#pragma once
// Internal to the rendezvous: what one launcher's variables say, before flags are applied,
// gaps are filled and the whole is checked. Each value remembers where it came from so an error
// can name the variable (or flag) the user has to fix.
#include <optional>
#include <initializer_list>
#include <string>
#include <utility>

#include "ddx/processes/env.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx::rendezvous_detail {

struct Field {
  std::optional<long long> value;
  // A variable or flag name ("RANK", "--rank") when `direct`, else how the value was derived
  // ("SLURM_TASKS_PER_NODE=2(x3),1").
  std::string origin;
  bool direct = true;

  void set(long long v, std::string from, bool is_direct = true) {
    value = v;
    origin = std::move(from);
    direct = is_direct;
  }
};

struct Draft {
  RendezvousSource source = RendezvousSource::SingleProcess;
  Field rank, world_size, local_rank, local_world_size, node_rank, num_nodes, master_port;
  // Used only when num_nodes is unset and world is not a multiple of local world.
  Field num_nodes_fallback;
  // The launcher's own rank and world variables, for "RANK is set but WORLD_SIZE is not".
  std::string rank_key, world_key;
  std::optional<std::string> master_addr;
  std::string master_addr_origin;
  // Why no master address / port could be found, when the generic advice would mislead.
  std::string missing_addr_hint, missing_port_hint;
  bool zero_port_allowed = false;  // 0 means "rank 0 picks" (explicit flag, ddx launch)
  bool mpi_capable = false;        // an incomplete endpoint can be agreed over MPI
  int restart_count = 0;
  std::string run_id;
};

// Reads an integer variable if set (any int; range checks come after flags are applied).
void read_int(const EnvMap& env, const std::string& key, Field& field);
// The first of `keys` that is set, as {key, value}.
std::optional<std::pair<std::string, std::string>> first_set(
    const EnvMap& env, std::initializer_list<const char*> keys);

// One reader per launcher; each fills what its variables say.
Draft read_single_process(const EnvMap& env);
Draft read_torchrun(const EnvMap& env, bool via_ddx_launch);
Draft read_open_mpi(const EnvMap& env);
Draft read_mpich(const EnvMap& env);
Draft read_slurm(const EnvMap& env);

}  // namespace ddx::rendezvous_detail
