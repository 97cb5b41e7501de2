// The variants `ddx parity` checks against the single-device baseline. A new strategy joins the
// suite with one entry here (and its registration in the trainer's strategy registry).
#include <algorithm>

#include "harness/parity/parity.h"
#include "models/model_config.h"

namespace ddx::parity {

const std::vector<Variant>& registered_variants() {
  static const std::vector<Variant> variants = {
      {"ddp", "data parallel, bucketed all-reduce overlapped with backward",
       {"--strategy", "ddp", "--bucket-cap-mb", "0.05", "--first-bucket-mb", "0.01"}, 1},
      {"ddp-accum2", "data parallel with 2 accumulation micro-steps (no_sync on the first)",
       {"--strategy", "ddp"}, 2},
      {"ddp-zero1", "data parallel with the optimizer state sharded (ZeRO-1)",
       {"--strategy", "ddp", "--zero1"}, 1},
      {"ddp-bucket-view", "data parallel with .grad aliasing the buckets",
       {"--strategy", "ddp", "--grad-as-bucket-view"}, 1},
      {"ddp-fused-adamw", "data parallel with --fused-adamw: last-bit differences from the exact baseline's AdamW",
       {"--strategy", "ddp", "--fused-adamw"}, 1},
      {"fsdp", "fully sharded: per-unit all-gather, reshard after forward (ZeRO-3), prefetch 1",
       {"--strategy", "fsdp"}, 1},
      {"fsdp-zero2", "fully sharded, gathered weights kept from forward to backward (ZeRO-2), prefetch 2",
       {"--strategy", "fsdp", "--no-reshard-after-forward", "--prefetch", "2"}, 1},
      {"fsdp-accum2", "fully sharded with 2 accumulation micro-steps (no reduce-scatter on the first)",
       {"--strategy", "fsdp"}, 2},
      {"fsdp-recompute", "fully sharded with activation checkpointing, CPU offload, no prefetch",
       {"--strategy", "fsdp", "--checkpoint-activations", "--cpu-offload", "--prefetch", "0"}, 1},
      {"tp", "tensor parallel: heads, MLP width and vocabulary split, vocab-parallel loss (debug-tp model)",
       {"--strategy", "tp"}, 1, false, "debug-tp"},
      {"tp-sp", "tensor parallel with sequence parallelism: all-gather / reduce-scatter on the sequence",
       {"--strategy", "tp", "--sequence-parallel"}, 1, false, "debug-tp"},
      {"tp-accum2", "tensor parallel with 2 accumulation micro-steps",
       {"--strategy", "tp"}, 2, false, "debug-tp"},
      {"2d", "2D: tensor parallel over 2 consecutive ranks x FSDP over the rest (world 4: 2 x 2)",
       {"--strategy", "2d", "--tp", "2"}, 1, true, "debug-tp", 2, 2},
      {"2d-sp", "2D (2 x 2) with sequence parallelism inside each TP group",
       {"--strategy", "2d", "--tp", "2", "--sequence-parallel"}, 1, true, "debug-tp", 2, 2},
      {"2d-replicate", "2D with DDP instead of FSDP on the data-parallel dimension (--dp-replicate)",
       {"--strategy", "2d", "--tp", "2", "--dp-replicate"}, 1, true, "debug-tp", 2, 2},
      {"pp-gpipe", "pipeline over every rank, GPipe schedule, 4 micro-batches (8-block debug-pp model)",
       {"--strategy", "pp", "--pp-schedule", "gpipe", "--microbatches", "4"}, 1, false, "debug-pp"},
      {"pp-1f1b", "pipeline over every rank, 1F1B schedule, 4 micro-batches, 2 accumulation steps",
       {"--strategy", "pp", "--pp-schedule", "1f1b", "--microbatches", "4"}, 2, false, "debug-pp"},
      {"pp-interleaved", "pipeline over every rank, interleaved 1F1B with 2 stages per rank, 4 micro-batches",
       {"--strategy", "pp", "--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages", "2", "--microbatches", "4"},
       1, false, "debug-pp"},
      {"pp-dp", "pipeline of 2 (1F1B, 2 micro-batches) x replicas over the remaining ranks (--dp-replicate)",
       {"--strategy", "pp", "--pp", "2", "--microbatches", "2", "--dp-replicate"}, 1, true, "debug-pp", 2},
      {"pp-fsdp", "pipeline of 2 (1F1B, 4 micro-batches) x FSDP over the remaining ranks (world 4: 2 x 2)",
       {"--strategy", "pp", "--pp", "2", "--microbatches", "4"}, 1, true, "debug-pp", 2, 2},
      {"pp-tp", "3D: pipeline of 2 (1F1B, 2 micro-batches) x tensor parallel over 2 consecutive ranks (debug-tp model)",
       {"--strategy", "pp", "--pp", "2", "--tp", "2", "--microbatches", "2"}, 1, true, "debug-tp", 4},
  };
  return variants;
}

namespace {

// The value after `flag` in the variant's ddx train flags, or `fallback`.
int64_t flag_value(const Variant& v, const std::string& flag, int64_t fallback) {
  auto it = std::find(v.flags.begin(), v.flags.end(), flag);
  return it != v.flags.end() && it + 1 != v.flags.end() ? std::stoll(*(it + 1)) : fallback;
}

bool has_flag(const Variant& v, const std::string& flag) {
  return std::find(v.flags.begin(), v.flags.end(), flag) != v.flags.end();
}

// Why world size n does not hold the variant's mesh: fewer ranks than its smallest layout (2d at
// 2 ranks would be TP alone), or ranks that do not split into whole model replicas.
std::string layout_reason(const Variant& v, int n) {
  const int fewest = v.replica_ranks * v.min_replicas;
  const std::string ranks = std::to_string(v.replica_ranks) + " ranks";
  if (n < fewest) {
    return "needs at least " + std::to_string(fewest) + " ranks: " +
           (v.min_replicas > 1 ? std::to_string(v.min_replicas) + " data-parallel replicas of " + ranks + " each"
                               : "one model replica spans " + ranks);
  }
  if (n % v.replica_ranks != 0) return std::to_string(n) + " ranks do not split into model replicas of " + ranks;
  return "";
}

}  // namespace

std::string unfit_reason(const Variant& v, const std::string& model, int n, const ParityOptions& o) {
  if (std::string why = layout_reason(v, n); !why.empty()) return why;
  const int64_t split = v.dp_size(n) * v.grad_accum;
  if (o.global_batch % split != 0) {
    return "--global-batch " + std::to_string(o.global_batch) + " does not split over " + std::to_string(v.dp_size(n)) +
           " data-parallel rank(s) x " + std::to_string(v.grad_accum) + " micro-step(s)";
  }
  const int64_t seq_length = o.seq_length;
  const models::ModelConfig m = models::resolve_model_config(model);
  const std::string strategy = v.flags.size() >= 2 ? v.flags[1] : v.name;
  // The layout the flags ask for at world size n (as the strategies read them).
  int64_t tp = 1, stages = 0;
  if (strategy == "tp") tp = flag_value(v, "--tp", n);
  if (strategy == "2d") tp = flag_value(v, "--tp", 0);
  if (strategy == "pp") {
    tp = flag_value(v, "--tp", 1);
    stages = flag_value(v, "--pp", n / tp) * flag_value(v, "--pp-virtual-stages", 1);
  }
  const std::string of_model = " of model " + model;
  if (tp > 1 && m.num_heads % tp != 0) {
    return "TP size " + std::to_string(tp) + " does not divide the " + std::to_string(m.num_heads) + " query heads" + of_model;
  }
  if (tp > 1 && m.num_kv_heads % tp != 0) {
    return "TP size " + std::to_string(tp) + " does not divide the " + std::to_string(m.num_kv_heads) + " KV heads" + of_model;
  }
  if (tp > 1 && has_flag(v, "--sequence-parallel") && seq_length % tp != 0) {
    return "sequence parallelism: " + std::to_string(seq_length) + " tokens do not split over TP size " + std::to_string(tp);
  }
  if (stages > m.num_layers) {
    return std::to_string(stages) + " pipeline stages exceed the " + std::to_string(m.num_layers) + " blocks" + of_model;
  }
  const int64_t microbatches = flag_value(v, "--microbatches", 1), per_rank = o.global_batch / split;
  if (per_rank % microbatches != 0) {
    return std::to_string(per_rank) + " sequences per rank do not split into " + std::to_string(microbatches) +
           " pipeline micro-batches";
  }
  const int64_t pp = stages / flag_value(v, "--pp-virtual-stages", 1);
  if (has_flag(v, "interleaved-1f1b") && (microbatches * v.grad_accum) % pp != 0) {
    return "the interleaved schedule needs its " + std::to_string(microbatches * v.grad_accum) +
           " micro-batches per step to be a multiple of the " + std::to_string(pp) + " pipeline ranks";
  }
  return "";
}

}  // namespace ddx::parity
