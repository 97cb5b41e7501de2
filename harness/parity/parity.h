#pragma once
// `ddx parity`: proof that every parallel strategy reproduces the single-device loss curve.
// It runs the single-device baseline and each registered variant x world size through
// `ddx launch` on a deterministic set-up (same initial weights, same global batches, no
// dropout, fp32), compares every run with the baseline step by step, and reports a table,
// report.json, JUnit XML and a loss-curve plot.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::parity {

struct ParityOptions {
  std::vector<std::string> variants;  // empty: every registered variant
  std::vector<int> world_sizes{2, 4};
  // Every variant's model when given (a preset or a Hugging Face config); empty: "debug", and
  // each variant's own default model (debug-tp, debug-pp) where it has one.
  std::string model;
  int64_t steps = 20;
  int64_t global_batch = 8;
  int64_t seq_length = 32;
  std::string dtype = "fp32";
  uint64_t seed = 1234;
  double lr = 3e-3;
  double tolerance_rel = 1e-5;     // per step: loss and gradient norm, relative
  double grads_tolerance = -1;     // step-1 gradients (curves.h); < 0: default_grads_tolerance(dtype)
  double weight_tolerance = 0.25;  // final weights, in units of AdamW's largest single step
  std::string out_dir = "parity-out";
  std::string golden;       // compare the baseline with this golden file
  std::string save_golden;  // write the baseline's golden file here
  bool determinism = true;  // run the baseline twice: parameter checksums must be identical
  bool uneven_tokens = false;  // mask label prefixes so ranks hold different token counts
  double run_timeout_s = 600;
  // Empty: multi-rank runs start under `ddx launch --nproc-per-node N` on this host. Else the
  // command prefix that starts them ("srun -N 2 --ntasks-per-node 2", "mpiexec -n 4"): it
  // decides the ranks, so each run's world size is checked against the one it is for.
  std::string launcher;
};

// One way of training that must match the baseline: a strategy plus flags.
struct Variant {
  std::string name;          // "ddp", "ddp-accum2", "ddp-zero1", "fsdp", ...
  std::string description;
  std::vector<std::string> flags;  // passed to ddx train
  int64_t grad_accum = 1;
  // False when every rank reads the whole global batch (tensor parallelism), so the per-rank
  // batch is not divided by the world size.
  bool data_parallel = true;
  // The model this variant runs when the suite is given none (TP needs head counts the world
  // sizes divide); it is compared with its own single-device baseline of that model. A --model
  // the user names replaces it (a layout that model cannot take is skipped, saying why).
  std::string model;
  // With data_parallel: the ranks that hold one model replica (a TP group of 2 for 2d, a
  // pipeline of 2 for pp x dp), so the data-parallel size is the world size divided by this.
  int replica_ranks = 1;
  // The fewest replicas a run needs: 2d at world 2 would be TP alone, so it runs only from 2 x 2.
  int min_replicas = 1;

  // The data-parallel ranks at world size n, which split the global batch.
  int dp_size(int n) const { return data_parallel ? n / replica_ranks : 1; }
};

// Every registered variant. Adding a strategy to the suite is one entry in parity_variants.cpp.
const std::vector<Variant>& registered_variants();

// Why `variant` cannot run model `model` (a preset or config file) at world size n with the
// suite's batch: fewer ranks than its mesh needs or ranks that do not split into its replicas
// (2d at 2 ranks, pp-tp at 6), a global batch its data-parallel ranks and micro-steps do not split, heads or
// KV heads its TP size does not divide, more pipeline stages than blocks, a sequence that does
// not split for sequence parallelism; empty when it can.
std::string unfit_reason(const Variant& variant, const std::string& model, int n, const ParityOptions& options);

// Runs the suite; returns the exit code (0 only when every run is within tolerance).
int run_parity(const ParityOptions& options);

}  // namespace ddx::parity
