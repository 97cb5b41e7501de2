#pragma once
// Internal: the single interposition point every op of the collective layer goes through.
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

#include "ddx/collectives.h"

namespace ddx::detail {

struct LaunchSpec {
  OpRecord record;                       // op, shapes, dtype, peer; the layer fills the rest
  c10::DeviceType device = c10::DeviceType::CPU;
  std::vector<at::Tensor> inputs;        // shown to hooks before launch
  std::vector<at::Tensor> outputs;       // shown to hooks after wait
  std::function<c10::intrusive_ptr<c10d::Work>()> start;  // hands the op to the backend
  std::function<void()> finish;          // local part after completion (may be empty)
};

// Numbers the op, records it, runs hooks and observers, starts it and tracks completion.
Work launch(Group& group, LaunchSpec spec);

// The same bookkeeping for an op the backend runs synchronously (monitored barrier).
void run_blocking(Group& group, OpRecord record, const std::function<void()>& body);

}  // namespace ddx::detail
