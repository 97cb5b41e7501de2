#pragma once
// FSDP's own flags, read by fsdp and by the strategies that shard with it (2d's TP slices, pp's
// stages). Everything ddx knows about these flags is here: their defaults, how they are added to
// `ddx train`, what they need of the other flags, and which one a run changed. No LibTorch.
#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace ddx::train {

struct FsdpOptions {
  bool reshard_after_forward = true;   // free gathered blocks after forward (ZeRO-3)
  int64_t prefetch = 1;                // units whose all-gather starts early
  std::string mp_param_dtype;          // fp32 | bf16 for gathered parameters ("" = --dtype)
  std::string mp_reduce_dtype;         // fp32 | bf16 for the reduce-scatter ("" = param dtype)
  bool cpu_offload = false;            // shards, gradients and the update on the CPU
  bool checkpoint_activations = false; // recompute each block in backward

  // The first flag whose value differs from its default ("" when none), named as typed: for a
  // layout that turns out (from the world size) to leave FSDP nothing to shard.
  std::string changed_flag() const;
};

// Adds FSDP's flags to `ddx train`, bound to `options`.
void add_fsdp_flags(CLI::App& cmd, FsdpOptions& options);

// Throws UsageError when the mixed-precision flags meet a --dtype they cannot work from.
void check_fsdp_options(const FsdpOptions& options, const std::string& dtype);

}  // namespace ddx::train
