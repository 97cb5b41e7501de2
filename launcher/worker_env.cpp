#include "launcher/worker_env.h"

namespace ddx::launcher {

bool should_default_omp_threads(const EnvMap& launcher_env) {
  return !env_get(launcher_env, "OMP_NUM_THREADS").has_value();
}

EnvMap worker_env(const EnvMap& launcher_env, const LaunchOptions& o, const WorkerSlot& slot) {
  EnvMap env = launcher_env;
  // There is no torchelastic agent store here; an inherited flag would send workers to one.
  env.erase("TORCHELASTIC_USE_AGENT_STORE");
  int world_size = o.nnodes * o.nproc_per_node;
  auto set = [&env](const char* key, const std::string& value) { env[key] = value; };
  auto set_int = [&set](const char* key, int value) { set(key, std::to_string(value)); };

  set_int("RANK", slot.rank);
  set_int("WORLD_SIZE", world_size);
  set_int("LOCAL_RANK", slot.local_rank);
  set_int("LOCAL_WORLD_SIZE", o.nproc_per_node);
  set_int("GROUP_RANK", o.node_rank);
  set_int("GROUP_WORLD_SIZE", o.nnodes);
  // One role ("default") spanning the job, as torchrun without --role.
  set("ROLE_NAME", "default");
  set_int("ROLE_RANK", slot.rank);
  set_int("ROLE_WORLD_SIZE", world_size);
  set("MASTER_ADDR", o.master_addr);
  // Across nodes each launcher restarts when its own workers fail, not when the others' do: attempt
  // k rendezvouses one port above attempt k-1, so the node that restarts first cannot reach the
  // previous attempt's store (alive in the other node's rank 0 while it dumps) and mix the two.
  set_int("MASTER_PORT", o.master_port + (o.nnodes > 1 ? slot.restart_count : 0));
  set_int("TORCHELASTIC_RESTART_COUNT", slot.restart_count);
  set_int("TORCHELASTIC_MAX_RESTARTS", o.max_restarts);
  set("TORCHELASTIC_RUN_ID", o.run_id);
  set("TORCHELASTIC_ERROR_FILE", slot.error_file);
  set("DDX_LAUNCH", "1");
  env.erase("DDX_STORE_LISTEN_FD");
  if (slot.rank == 0 && o.store_listen_fd >= 0) set_int("DDX_STORE_LISTEN_FD", o.store_listen_fd);
  // Programs other than ddx get torchrun's default; ddx's own workers see the mark and pick
  // their threads themselves (ddx/rendezvous/cpu_threads.h), as they do under srun or mpirun.
  if (should_default_omp_threads(launcher_env)) {
    set("OMP_NUM_THREADS", "1");
    set("DDX_OMP_NUM_THREADS_SET_BY", "ddx launch");
  }
  return env;
}

}  // namespace ddx::launcher
