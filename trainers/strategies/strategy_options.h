#pragma once
// The strategy-specific options of `ddx train`, each set owned by the strategy folder that
// reads it; the registry (strategy_registry.h) adds their flags and refuses them under the
// strategies that do not read them. A new strategy with flags of its own adds its set here.
// No LibTorch.
#include "strategies/ddp/ddp_options.h"
#include "strategies/fsdp/fsdp_options.h"
#include "strategies/parallel_dims.h"
#include "strategies/pp/pp_options.h"
#include "strategies/tp/tp_options.h"

namespace ddx::train {

struct StrategyOptions {
  LayoutFlags layout;  // --tp, --pp, --dp-replicate: resolved into ParallelDims
  DdpOptions ddp;
  FsdpOptions fsdp;
  TpOptions tp;
  PpOptions pp;
};

}  // namespace ddx::train
