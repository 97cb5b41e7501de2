#pragma once
// The nccl engine: raw NCCL and the CUDA runtime, one GPU per rank, like nccl-tests (no
// LibTorch anywhere near the timed path). The ncclUniqueId travels through the Coordinator
// (the ddx store), so it runs under ddx launch, torchrun, srun or mpiexec alike.
#include <memory>

#include "bandwidth/engine.h"

namespace ddx::bw {

// Whether this build has the nccl engine (built with the CUDA toolkit).
bool nccl_engine_built();

// Picks GPU local_rank % visible GPUs (NCCL_TESTS_DEVICE adds an offset, as in nccl-tests),
// creates the communicator and a stream. Throws UsageError with one line when no GPU is
// visible or the build has no CUDA. `timeout_s` bounds every stream synchronization
// (0: none); on expiry the communicator is aborted and the error names the op.
std::unique_ptr<Engine> make_nccl_engine(Coordinator& coord, int local_rank, int local_ranks, double timeout_s);

}  // namespace ddx::bw
