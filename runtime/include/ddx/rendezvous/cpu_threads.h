#pragma once
// How many CPU threads a worker's kernels use. The count changes how LibTorch splits a sum over
// threads, and so the last bits of every loss: a worker must pick the same count whoever
// started it (ddx launch, torchrun, srun, mpirun), or the same job differs by launcher. Each
// worker decides it itself at start-up, from what every launcher tells it alike. No LibTorch
// here (World::init applies the count).
#include <string>

#include "ddx/processes/env.h"

namespace ddx {

struct CpuThreads {
  int count = 1;
  std::string reason;  // "2 cores / 4 ranks on this node", "OMP_NUM_THREADS=3, set by the user"
};

// The user's choice where there is one: DDX_CPU_THREADS, else OMP_NUM_THREADS (a positive
// integer; anything else is a UsageError naming the variable), except the OMP_NUM_THREADS=1 a
// launcher sets for every worker it starts (ddx launch marks it with
// DDX_OMP_NUM_THREADS_SET_BY; torchrun's is a 1 under TORCHELASTIC_RUN_ID). Otherwise the cores
// this process may run on shared among the ranks of its node: max(1, cores / local_world_size).
CpuThreads choose_cpu_threads(const EnvMap& env, int local_world_size, int cores);

// The CPUs in this process's affinity mask (what a scheduler's cgroup or binding left it), at
// least 1.
int cores_in_affinity_mask();

}  // namespace ddx
