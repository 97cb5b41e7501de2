// The strategies `--strategy` can name. Adding one is a class and one line here. A factory gets
// the options and the world size the trainer rendezvoused with (some layouts pick a variant by it).
#include <functional>
#include <map>

#include "ddx/errors.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/fsdp/fsdp_strategy.h"
#include "strategies/pp/pp_strategy.h"
#include "strategies/replicated/replicated_strategy.h"
#include "strategies/tp/tp_strategy.h"
#include "strategies/two_d/two_d_strategy.h"

namespace ddx::train {
namespace {

struct Entry {
  const char* description;
  std::function<std::unique_ptr<Strategy>(const TrainOptions&, int world_size)> make;
};

const std::map<std::string, Entry>& registry() {
  static const std::map<std::string, Entry> entries = {
      {"single", {"one rank holds everything (the baseline every strategy is checked against)",
                  [](const TrainOptions&, int) { return std::make_unique<ReplicatedStrategy>(); }}},
      {"ddp", {"data parallel: bucketed all-reduce overlapped with backward (--zero1 shards the optimizer)",
               [](const TrainOptions&, int) { return std::make_unique<DdpStrategy>(); }}},
      {"fsdp", {"fully sharded data parallel: parameters, gradients and optimizer state sharded per parameter along dim 0",
                [](const TrainOptions&, int) { return std::make_unique<FsdpStrategy>(); }}},
      {"tp", {"tensor parallel (Megatron layout): heads, MLP width and vocabulary split over --tp ranks (--sequence-parallel)",
              [](const TrainOptions&, int) { return std::make_unique<TpStrategy>(); }}},
      {"2d", {"tensor parallel over --tp consecutive ranks x FSDP over the rest (--dp-replicate: DDP instead)",
              [](const TrainOptions& o, int) { return make_two_d_strategy(o); }}},
      {"pp", {"pipeline parallel: blocks in --pp stages, --pp-schedule gpipe|1f1b|interleaved-1f1b over --microbatches; FSDP over the ranks left (--dp-replicate: replicas)",
              [](const TrainOptions& o, int world_size) { return make_pp_strategy(o, world_size); }}},
  };
  return entries;
}

}  // namespace

void check_strategy_name(const std::string& name) {
  if (registry().count(name) == 0) throw UsageError("--strategy " + name + " is not one of: " + strategy_names());
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const TrainOptions& options, int world_size) {
  check_strategy_name(name);
  return registry().at(name).make(options, world_size);
}

std::string strategy_names() {
  std::string out;
  for (const auto& [name, entry] : registry()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace ddx::train
