#pragma once
// The gloo engine: the ddx collective layer (ddx/collectives.h) on CPU tensors over c10d Gloo,
// so every op is recorded like any other ddx collective and the test-only perturbations of
// the collective layer apply.
#include <memory>

#include "bandwidth/engine.h"
#include "ddx/process_group.h"

namespace ddx::bw {

std::unique_ptr<Engine> make_gloo_engine(Group& group, int local_ranks);

// Out-of-band coordination through the job's store (keys under ddx/bw/).
std::unique_ptr<Coordinator> make_store_coordinator(c10d::Store& store, int rank, int size);

}  // namespace ddx::bw
