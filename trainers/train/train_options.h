#pragma once
// Everything `ddx train` can be told. Flags are the guide's (chapter 1) plus what a serious
// trainer needs; each strategy's own options are its folder's (strategy_options.h).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "strategies/strategy_options.h"

namespace ddx::train {

struct TrainOptions {
  std::string experiment_name;    // -e: checkpoints and resume only when set
  std::string dataset = "builtin:default";
  std::string tokenizer = "byte"; // "byte" or a tokenizer.json
  std::string model = "debug";    // preset, config.json or a folder holding one
  std::string init_from;          // pretrained safetensors (file, index or folder)
  std::string save_dir = "outputs";
  std::string cache_dir;          // token caches; "": beside the data, else <save-dir>/cache
  uint64_t seed = 0;
  int64_t num_epochs = 100;
  int64_t max_steps = 0;          // 0: run the epochs out (kDemoSteps for the no-length demo)
  double lr = 3e-5;
  int64_t batch_size = 1;         // per data-parallel rank and micro-step (the guide's -b)
  int64_t seq_length = 128;
  int64_t grad_accum = 1;
  int64_t log_freq = 10;
  int64_t ckpt_freq = 500;
  int64_t keep_checkpoints = 3;
  std::string dtype = "fp32";     // fp32 | bf16 (pure bf16 weights, as the guide does on GPU)
  std::string device = "auto";    // auto | cpu | cuda
  int64_t warmup_steps = 0;
  int64_t lr_decay_steps = 1000;  // cosine to lr*0.01 over this many steps (the guide's T_max)
  double weight_decay = 0.0;
  double max_grad_norm = 0.0;     // 0: no clipping
  bool fused_adamw = false;       // at::_fused_adamw_: faster, not bit-identical to the default
  std::string strategy = "single";
  std::string metrics_file;       // default: <experiment dir>/metrics.jsonl or <save-dir>/runs/<time>-<pid>/metrics.jsonl
  std::string plot_file;          // default: loss.svg in the run folder, or <metrics file>.svg beside a named one
  bool overwrite_metrics = false; // replace an existing --metrics-file and its plot (else refused unless resuming)
  bool progress = true;           // progress bar when stderr is a terminal
  double collective_timeout_s = 0;  // 0: DDX_COLLECTIVE_TIMEOUT when set, else 300 s (hang_options_from_env)
  std::string trace_dir;          // flight-recorder dumps (default: DDX_TRACE_DIR, else <run folder>/traces)
  std::string on_timeout = "abort";  // abort | dump | wait
  bool check_collectives = false; // compare op fingerprints across ranks before each collective
  bool verify_init = false;       // DDP: compare parameter checksums instead of broadcasting
  int64_t checksum_freq = 0;      // parameter checksum in the metrics every N steps (0: at the end)
  std::string final_weights;      // write the full final parameters here (safetensors, ddx names)
  std::string grads_file;         // write the full gradients of step grads_step here
  int64_t grads_step = 1;
  bool uneven_tokens = false;     // mask a position-dependent prefix of each sequence's labels
  // Detectors (docs/faults.md).
  bool nan_check = false;         // non-finite local gradients named before the optimizer step
  std::string on_nan = "stop";    // stop | skip
  int64_t replica_check_freq = 0; // parameter checksums across data-parallel replicas every N steps
  double straggler_factor = 2.0;  // warn when a rank is this much slower than the median (0: off)
  double straggler_window_s = 2.0;  // ... on average over at least this long (and 8 logged steps)

  // Each strategy's own options (strategies/strategy_options.h), its flags added by the registry.
  StrategyOptions strategy_options;

  // Global batch size in sequences: batch_size x data-parallel size x grad_accum.
  int64_t global_batch(int dp_size) const { return batch_size * dp_size * grad_accum; }
};

// Adds every flag to `cmd`, bound to `options`.
void add_train_flags(CLI::App& cmd, TrainOptions& options);

// What only the parsed command line knows (which flags were given): refuses a strategy-specific
// flag under a strategy that ignores it (strategy_registry.h), and sizes a run on the built-in corpus with no length
// flags as a demo (kDemoSteps steps, the schedule over them). Throws UsageError naming the flag.
constexpr int64_t kDemoSteps = 300;
void finish_train_flags(const CLI::App& cmd, TrainOptions& options);

// Cross-field checks CLI11 cannot express, and what a run would replace on disk: an existing
// --metrics-file (or the plot named after it) is refused unless --overwrite-metrics, or -e names an
// experiment that already exists (a resume or restart continues its curve). Throws UsageError
// naming the flag.
void validate(const TrainOptions& options);

// Where the loss plot goes: --plot-file; else beside a named --metrics-file, with its name and
// .svg (two runs writing their curves into one folder get one plot each); else loss.svg in the
// run folder that holds `metrics_path`.
std::string loss_plot_path(const TrainOptions& options, const std::string& metrics_path);

}  // namespace ddx::train
