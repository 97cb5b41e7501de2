// The strategies `--strategy` can name. Adding one is its folder and one line here: its name,
// what it does, its layout (which parallel dimensions it has), the flag sets it reads, and how it
// is made from its options and the resolved dimensions. Flags of its own are one more set.
#include "strategies/strategy_registry.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/fsdp/fsdp_strategy.h"
#include "strategies/pp/pp_strategy.h"
#include "strategies/replicated/replicated_strategy.h"
#include "strategies/strategy.h"
#include "strategies/tp/tp_strategy.h"
#include "strategies/two_d/two_d_strategy.h"

namespace ddx::train {
namespace {

// The sets of strategy-specific flags. A flag typed under a strategy whose entry does not list
// its set is refused.
enum class FlagSet { Ddp, Fsdp, TpDegree, SequenceParallel, DpReplicate, Pipeline };

struct FlagSetEntry {
  FlagSet set;
  void (*add)(CLI::App&, StrategyOptions&);
};

// In the order --help lists them.
const std::vector<FlagSetEntry>& flag_sets() {
  static const std::vector<FlagSetEntry> sets = {
      {FlagSet::Ddp, [](CLI::App& c, StrategyOptions& o) { add_ddp_flags(c, o.ddp); }},
      {FlagSet::Fsdp, [](CLI::App& c, StrategyOptions& o) { add_fsdp_flags(c, o.fsdp); }},
      {FlagSet::TpDegree, [](CLI::App& c, StrategyOptions& o) { add_tp_degree_flag(c, o.layout); }},
      {FlagSet::SequenceParallel, [](CLI::App& c, StrategyOptions& o) { add_sequence_parallel_flag(c, o.tp); }},
      {FlagSet::DpReplicate, [](CLI::App& c, StrategyOptions& o) { add_dp_replicate_flag(c, o.layout); }},
      {FlagSet::Pipeline, [](CLI::App& c, StrategyOptions& o) {
         add_pp_degree_flag(c, o.layout);
         add_pp_flags(c, o.pp);
       }},
  };
  return sets;
}

struct Entry {
  const char* name;
  const char* description;
  Layout layout;
  std::vector<FlagSet> flags;
  std::unique_ptr<Strategy> (*make)(const StrategyOptions&, const ParallelDims&);
};

const std::vector<Entry>& registry() {
  using S = const StrategyOptions&;
  using D = const ParallelDims&;
  static const std::vector<Entry> entries = {
      {"single", "one rank holds everything (the baseline every strategy is checked against)",
       Layout::DataParallel, {},
       [](S, D) -> std::unique_ptr<Strategy> { return std::make_unique<ReplicatedStrategy>(); }},
      {"ddp", "data parallel: bucketed all-reduce overlapped with backward (--zero1 shards the optimizer)",
       Layout::DataParallel, {FlagSet::Ddp},
       [](S o, D) -> std::unique_ptr<Strategy> { return std::make_unique<DdpStrategy>(o.ddp); }},
      {"fsdp", "fully sharded data parallel: parameters, gradients and optimizer state sharded per parameter along dim 0",
       Layout::DataParallel, {FlagSet::Fsdp},
       [](S o, D) -> std::unique_ptr<Strategy> { return std::make_unique<FsdpStrategy>(o.fsdp); }},
      {"tp", "tensor parallel (Megatron layout): heads, MLP width and vocabulary split over --tp ranks (--sequence-parallel)",
       Layout::TensorParallel, {FlagSet::TpDegree, FlagSet::SequenceParallel},
       [](S, D) -> std::unique_ptr<Strategy> { return std::make_unique<TpStrategy>(); }},
      {"2d", "tensor parallel over --tp consecutive ranks x FSDP over the rest (--dp-replicate: DDP instead)",
       Layout::TwoD, {FlagSet::Fsdp, FlagSet::TpDegree, FlagSet::SequenceParallel, FlagSet::DpReplicate},
       [](S o, D d) { return make_two_d_strategy(o.fsdp, d); }},
      {"pp", "pipeline parallel: blocks in --pp stages, --pp-schedule gpipe|1f1b|interleaved-1f1b over --microbatches; FSDP over the ranks left (--dp-replicate: replicas)",
       Layout::Pipeline, {FlagSet::Fsdp, FlagSet::TpDegree, FlagSet::DpReplicate, FlagSet::Pipeline},
       [](S o, D d) { return make_pp_strategy(o.pp, o.fsdp, d); }},
  };
  return entries;
}

const Entry& entry(const std::string& name) {
  check_strategy_name(name);
  return *std::find_if(registry().begin(), registry().end(), [&](const Entry& e) { return e.name == name; });
}

bool reads(const Entry& e, FlagSet set) { return std::find(e.flags.begin(), e.flags.end(), set) != e.flags.end(); }

// Which set each strategy flag belongs to, by its name: the sets added to a scratch command.
const std::vector<std::pair<std::string, FlagSet>>& flag_owners() {
  static const std::vector<std::pair<std::string, FlagSet>> owners = [] {
    std::vector<std::pair<std::string, FlagSet>> out;
    CLI::App scratch;
    StrategyOptions options;
    for (const FlagSetEntry& s : flag_sets()) {
      const size_t before = scratch.get_options().size();
      s.add(scratch, options);
      const auto all = scratch.get_options();
      for (size_t i = before; i < all.size(); ++i) out.emplace_back(all[i]->get_name(), s.set);
    }
    return out;
  }();
  return owners;
}

}  // namespace

void check_strategy_name(const std::string& name) {
  for (const Entry& e : registry()) {
    if (e.name == name) return;
  }
  throw UsageError("--strategy " + name + " is not one of: " + strategy_names());
}

std::string strategy_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return join(names, ", ");
}

void add_strategy_flags(CLI::App& cmd, StrategyOptions& options) {
  for (const FlagSetEntry& s : flag_sets()) s.add(cmd, options);
}

void refuse_flags_of_other_strategies(const CLI::App& cmd, const std::string& strategy, const StrategyOptions& options) {
  const Entry& chosen = entry(strategy);
  for (const auto& [flag, set] : flag_owners()) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (!opt) throw std::logic_error("strategy flag " + flag + " is not a flag of this command");
    if (opt->count() == 0) continue;
    // A negated flag (--no-reshard-after-forward) is named as typed.
    std::string typed = flag;
    if (!opt->get_fnames().empty() && !opt->as<bool>()) typed = "--no-" + typed.substr(2);
    if (!reads(chosen, set)) {
      std::vector<std::string> readers;
      for (const Entry& e : registry()) {
        if (reads(e, set)) readers.emplace_back(e.name);
      }
      throw UsageError(typed + " applies to --strategy " + join(readers, " or ") + ", not " + strategy);
    }
    // --dp-replicate holds 2d's TP slices with DDP, pp's stages as replicas: an FSDP flag
    // would have nothing to tune.
    if (set == FlagSet::Fsdp && options.layout.dp_replicate && reads(chosen, FlagSet::DpReplicate)) {
      throw UsageError(typed + " tunes FSDP, but --strategy " + strategy + " --dp-replicate " +
                       (strategy == "2d" ? "replicates the TP slices with DDP" : "replicates each stage over the data-parallel ranks"));
    }
  }
}

ParallelDims resolve_parallel_dims(const std::string& strategy, const StrategyOptions& options, int world_size) {
  return resolve_parallel_dims(entry(strategy).layout, options.layout, options.tp.sequence_parallel, world_size);
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyOptions& options, const ParallelDims& dims) {
  return entry(name).make(options, dims);
}

}  // namespace ddx::train
