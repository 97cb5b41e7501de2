#pragma once
// One GPU per local rank for NCCL. NCCL refuses two ranks of one communicator on the same GPU
// ("Duplicate GPU detected"), but only inside its own setup, as an error that reads like a
// broken node; ddx says it before any communicator exists, in one line naming the cause.
#include <string>

namespace ddx {

// "" when `local_ranks` ranks on this host can each have their own of `devices` visible GPUs
// (rank r takes GPU r % devices), else the reason, naming the GPU `local_rank` would share.
std::string shared_gpu_problem(int local_rank, int local_ranks, int devices);

}  // namespace ddx
