#include "ddx/rendezvous/cpu_threads.h"

#include <sched.h>

#include <algorithm>
#include <climits>

namespace ddx {

namespace {

// OMP_NUM_THREADS=1 that a launcher set for every worker, not the user: ddx launch marks its
// own; torchrun sets 1 whenever the user did not (and says so), so under torchrun a 1 is its.
bool set_by_launcher(const EnvMap& env, const std::string& omp) {
  if (env_get(env, "DDX_OMP_NUM_THREADS_SET_BY")) return true;
  return omp == "1" && env_get(env, "TORCHELASTIC_RUN_ID") && !env_get(env, "DDX_LAUNCH");
}

}  // namespace

CpuThreads choose_cpu_threads(const EnvMap& env, int local_world_size, int cores) {
  if (const auto value = env_get(env, "DDX_CPU_THREADS")) {
    const int n = static_cast<int>(parse_int("DDX_CPU_THREADS", *value, 1, INT_MAX));
    return {n, "DDX_CPU_THREADS=" + *value};
  }
  if (const auto value = env_get(env, "OMP_NUM_THREADS"); value && !set_by_launcher(env, *value)) {
    const int n = static_cast<int>(parse_int("OMP_NUM_THREADS", *value, 1, INT_MAX));
    return {n, "OMP_NUM_THREADS=" + *value + ", set by the user"};
  }
  const int ranks = std::max(1, local_world_size);
  const int n = std::max(1, cores / ranks);
  return {n, std::to_string(cores) + " core" + (cores == 1 ? "" : "s") + " / " + std::to_string(ranks) + " rank" +
                 (ranks == 1 ? "" : "s") + " on this node"};
}

int cores_in_affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace ddx
