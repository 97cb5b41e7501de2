#pragma once
// What the rest of ddx asks the strategy registry (strategy_registry.cpp) before any strategy
// exists: the names, their flags and the parallel dimensions a run will have. No LibTorch: the
// flag parser and the dimension checks build without it.
#include <string>

#include "strategies/parallel_dims.h"
#include "strategies/strategy_options.h"

namespace CLI {
class App;
}

namespace ddx::train {

// Throws UsageError listing the strategies when `name` is not one of them.
void check_strategy_name(const std::string& name);
// "2d, ddp, ..." for help texts and errors.
std::string strategy_names();

// Adds every strategy's flags to `ddx train`, bound to `options`.
void add_strategy_flags(CLI::App& cmd, StrategyOptions& options);
// Refuses (UsageError naming the flag) a strategy flag typed under a strategy that does not read
// it: silently ignoring it would hide a forgotten or mistyped --strategy.
void refuse_flags_of_other_strategies(const CLI::App& cmd, const std::string& strategy, const StrategyOptions& options);

// The dimensions `strategy` lays over `world_size` ranks (parallel_dims.h), checked.
ParallelDims resolve_parallel_dims(const std::string& strategy, const StrategyOptions& options, int world_size);

}  // namespace ddx::train
