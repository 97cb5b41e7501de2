#include "strategies/fsdp/fsdp_options.h"

#include <CLI/CLI.hpp>

#include "ddx/errors/errors.h"

namespace ddx::train {

void add_fsdp_flags(CLI::App& cmd, FsdpOptions& o) {
  auto* fsdp = "Fully sharded (fsdp)";
  cmd.add_flag("--reshard-after-forward,!--no-reshard-after-forward", o.reshard_after_forward,
               "Free each block's gathered weights after its forward and gather again in backward (ZeRO-3; "
               "--no-reshard-after-forward keeps them: ZeRO-2)")->group(fsdp);
  cmd.add_option("--prefetch", o.prefetch, "Units whose all-gather is issued ahead of use, in forward and backward")
      ->check(CLI::Range(int64_t{0}, int64_t{64}))->capture_default_str()->group(fsdp);
  cmd.add_option("--mp-param-dtype", o.mp_param_dtype, "Dtype of gathered weights and compute (default: --dtype)")
      ->check(CLI::IsMember({"fp32", "bf16"}))->group(fsdp);
  cmd.add_option("--mp-reduce-dtype", o.mp_reduce_dtype, "Dtype of the gradient reduce-scatter (default: the param dtype)")
      ->check(CLI::IsMember({"fp32", "bf16"}))->group(fsdp);
  cmd.add_flag("--cpu-offload", o.cpu_offload, "Keep shards, their gradients and the optimizer step on the CPU")->group(fsdp);
  cmd.add_flag("--checkpoint-activations", o.checkpoint_activations,
               "Keep only each block's input in forward and recompute the block in backward")->group(fsdp);
}

std::string FsdpOptions::changed_flag() const {
  const FsdpOptions defaults;
  if (reshard_after_forward != defaults.reshard_after_forward) return "--no-reshard-after-forward";
  if (prefetch != defaults.prefetch) return "--prefetch";
  if (mp_param_dtype != defaults.mp_param_dtype) return "--mp-param-dtype";
  if (mp_reduce_dtype != defaults.mp_reduce_dtype) return "--mp-reduce-dtype";
  if (cpu_offload != defaults.cpu_offload) return "--cpu-offload";
  if (checkpoint_activations != defaults.checkpoint_activations) return "--checkpoint-activations";
  return "";
}

void check_fsdp_options(const FsdpOptions& o, const std::string& dtype) {
  if ((!o.mp_param_dtype.empty() || !o.mp_reduce_dtype.empty()) && dtype != "fp32") {
    throw UsageError("--mp-param-dtype/--mp-reduce-dtype need --dtype fp32 (the sharded master copy)");
  }
}

}  // namespace ddx::train
