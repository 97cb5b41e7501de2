#pragma once
// The mpi engine: MPICH collectives on host buffers, and the MPI coordinator. Needs MPI to be
// initialized by the caller (the command does it when launched by mpiexec). No LibTorch.
#include <memory>

#include "bandwidth/engine.h"

namespace ddx::bw {

// MPI_Init_thread if nobody did; returns true when this call initialized MPI (the caller then
// finalizes it with finalize_mpi).
bool ensure_mpi_initialized();
void finalize_mpi();
// MPI_COMM_WORLD's rank and size.
int mpi_world_rank();
int mpi_world_size();

std::unique_ptr<Engine> make_mpi_engine(int local_ranks);
// Out-of-band coordination over a duplicate of MPI_COMM_WORLD.
std::unique_ptr<Coordinator> make_mpi_coordinator();

}  // namespace ddx::bw
