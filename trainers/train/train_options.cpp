#include "train/train_options.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "ddx/text/text.h"
#include "faults/faults.h"
#include "strategies/strategy_registry.h"

namespace ddx::train {

void add_train_flags(CLI::App& cmd, TrainOptions& o) {
  cmd.add_option("-e,--experiment-name", o.experiment_name,
                 "Name of the run: checkpoints go to <save-dir>/<name> and re-running resumes");
  cmd.add_option("-d,--dataset", o.dataset,
                 "Alpaca/text JSONL, text file, folder, or builtin:default (generated corpus)")
      ->capture_default_str();
  cmd.add_option("--tokenizer", o.tokenizer, "byte, or a Hugging Face tokenizer.json")->capture_default_str();
  cmd.add_option("-m,--model", o.model,
                 "Preset (gpt2, gpt2-medium, llama-3.2-1b, llama-3.1-8b, debug, debug-llama, debug-tp, debug-tp-llama, debug-pp), "
                 "a config.json or a folder holding one")
      ->capture_default_str();
  cmd.add_option("--init-from", o.init_from, "Start from pretrained safetensors weights (file, index or folder)");
  cmd.add_option("--save-dir", o.save_dir, "Folder for experiments")->capture_default_str();
  cmd.add_option("--cache-dir", o.cache_dir,
                 "Folder for token caches (default: beside the data when writable, else <save-dir>/cache)");
  cmd.add_option("--seed", o.seed, "Seed of initialisation and data order")->capture_default_str();
  cmd.add_option("--num-epochs", o.num_epochs, "Epochs to run")->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--max-steps", o.max_steps, "Stop after this many optimizer steps (0: run the epochs out)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--lr", o.lr, "Peak learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  cmd.add_option("-b,--batch-size", o.batch_size, "Sequences per data-parallel rank and micro-step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd.add_option("-s,--seq-length", o.seq_length, "Tokens per sequence")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd.add_option("--grad-accum", o.grad_accum, "Micro-steps per optimizer step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd.add_option("--log-freq", o.log_freq, "Steps between logged metrics")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--ckpt-freq", o.ckpt_freq, "Steps between checkpoints (with -e)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--keep-checkpoints", o.keep_checkpoints, "Checkpoints kept (oldest removed)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))->capture_default_str();
  cmd.add_option("--dtype", o.dtype,
                 "fp32, bf16 (pure bf16 weights; for GPUs) or fp64 (tells a bug from rounding: parity and "
                 "reference tests)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp64"}))->capture_default_str();
  cmd.add_option("--device", o.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd.add_option("--warmup-steps", o.warmup_steps, "Linear warmup steps")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--lr-decay-steps", o.lr_decay_steps, "Cosine decay to lr*0.01 over this many steps after warmup")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd.add_flag("--fused-adamw", o.fused_adamw,
               "AdamW as one fused kernel per tensor (torch's fused=True): several times faster on CPU, but "
               "not bit-identical to the default (docs/performance.md)");
  cmd.add_option("--max-grad-norm", o.max_grad_norm, "Clip the global gradient norm (0: off)")
      ->check(CLI::Range(0.0, 1e6))->capture_default_str();
  cmd.add_option("--strategy", o.strategy, "Parallel strategy: " + strategy_names())->capture_default_str();
  cmd.add_option("--metrics-file", o.metrics_file,
                 "JSONL metrics (default: in the run folder). An existing file is refused unless -e continues "
                 "an existing experiment (then it is cut back to the resumed step and appended to)");
  cmd.add_option("--plot-file", o.plot_file,
                 "Loss-curve SVG written at the end (default: loss.svg in the run folder, or the --metrics-file's "
                 "name with .svg)");
  cmd.add_flag("--overwrite-metrics", o.overwrite_metrics, "Replace an existing --metrics-file and its plot");
  cmd.add_flag("!--no-progress", o.progress, "No progress bar");
  cmd.add_option("--collective-timeout", o.collective_timeout_s,
                 "Seconds before a collective gives up (default: DDX_COLLECTIVE_TIMEOUT, else 300)")
      ->check(CLI::Range(0.1, 86400.0));
  auto* hangs = "Hangs (docs/hangs.md)";
  cmd.add_option("--trace-dir", o.trace_dir, "Flight-recorder dumps on a hang (default: DDX_TRACE_DIR, else <run folder>/traces)")->group(hangs);
  cmd.add_option("--on-timeout", o.on_timeout, "What a collective timeout does after dumping")
      ->check(CLI::IsMember({"abort", "dump", "wait"}))->capture_default_str()->group(hangs);
  cmd.add_flag("--check-collectives", o.check_collectives,
               "Compare every collective's op, dtype, shape and sequence across ranks before it runs")->group(hangs);
  cmd.add_option("--checksum-freq", o.checksum_freq,
                 "Record a checksum of the full parameters every N steps (0: only at the end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd.add_option("--final-weights", o.final_weights, "Write the final full parameters to this safetensors file");
  cmd.add_option("--grads-file", o.grads_file,
                 "Write the full gradients of step --grads-step (summed over the ranks, before clipping and the "
                 "update) to this safetensors file");
  cmd.add_option("--grads-step", o.grads_step, "The step whose gradients --grads-file writes")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd.add_flag("--uneven-tokens", o.uneven_tokens,
               "Ignore the first ((7p mod 13) mod seq/2) labels of the sequence at global-batch position p, so "
               "ranks hold different token counts (tests loss normalisation; ddx parity --uneven-tokens)");
  // Parsed with DDX_FAULT by faults::announce before the command runs (one grammar, one parser).
  cmd.add_option_function<std::vector<std::string>>(
         "--fault", [](const std::vector<std::string>& specs) { for (const auto& s : specs) faults::add_flag_spec(s); },
         "Inject a fault: KIND@rank=R,step=S[,key=value...] (repeatable; kinds in docs/faults.md)")
      ->group("Fault injection (docs/faults.md)");
  auto* detectors = "Detectors (docs/faults.md)";
  cmd.add_flag("--nan-check", o.nan_check,
               "Before each optimizer step, name the first rank and parameter whose gradient is not finite")
      ->group(detectors);
  cmd.add_option("--on-nan", o.on_nan, "What --nan-check does then: stop the run, or skip the step's update")
      ->check(CLI::IsMember({"stop", "skip"}))->capture_default_str()->group(detectors);
  cmd.add_option("--replica-check-freq", o.replica_check_freq,
                 "Every N steps compare parameter checksums across data-parallel replicas and stop naming the "
                 "diverging rank and parameter (0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str()->group(detectors);
  cmd.add_option("--straggler-factor", o.straggler_factor,
                 "Warn when a rank's mean busy time per step exceeds this many times the median rank's over the "
                 "straggler window (0: off)")
      ->check(CLI::Range(0.0, 1e6))->capture_default_str()->group(detectors);
  cmd.add_option("--straggler-window", o.straggler_window_s,
                 "Seconds (and at least 8 logged steps) the straggler warning averages over: shorter windows see "
                 "the scheduler's imbalance on a shared host")
      ->check(CLI::Range(0.0, 1e6))->capture_default_str()->group(detectors);
  add_strategy_flags(cmd, o.strategy_options);
}

void finish_train_flags(const CLI::App& cmd, TrainOptions& o) {
  refuse_flags_of_other_strategies(cmd, o.strategy, o.strategy_options);
  const bool builtin = o.dataset.rfind("builtin:", 0) == 0;
  if (builtin && cmd.count("--max-steps") == 0 && cmd.count("--num-epochs") == 0) {
    // `ddx train` as a first try: a few seconds, a loss that visibly falls, then done.
    o.max_steps = kDemoSteps;
    if (cmd.count("--lr-decay-steps") == 0) o.lr_decay_steps = std::max<int64_t>(1, kDemoSteps - o.warmup_steps);
  }
}

namespace {

namespace fs = std::filesystem;

// A file of the user's that the run would replace, other than one -e's experiment already owns.
// An empty file has nothing to lose.
void refuse_replacing(const std::string& path, const std::string& what, const std::string& other) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(what + " is a folder; it takes the file to write");
  if (!fs::exists(path, ec) || fs::file_size(path, ec) == 0) return;
  throw UsageError(what + " already exists: name " + other + ", or pass --overwrite-metrics to replace it");
}

// The curve of a run is never silently truncated: a named --metrics-file that exists belongs to
// another run unless -e names an experiment that exists (a resume cuts the file back to the
// checkpoint's step and appends; a restart before the first checkpoint starts it over).
void refuse_replacing_metrics(const TrainOptions& o) {
  if (o.metrics_file.empty() || o.overwrite_metrics) return;
  std::error_code ec;
  if (!o.experiment_name.empty() && fs::exists(fs::path(o.save_dir) / o.experiment_name, ec)) return;
  refuse_replacing(o.metrics_file, "--metrics-file " + o.metrics_file, "another file");
  if (o.plot_file.empty()) {
    const std::string plot = loss_plot_path(o, o.metrics_file);
    refuse_replacing(plot, "--metrics-file " + o.metrics_file + ": its loss plot " + plot,
                     "a --plot-file or another --metrics-file");
  }
}

}  // namespace

std::string loss_plot_path(const TrainOptions& o, const std::string& metrics_path) {
  if (!o.plot_file.empty()) return o.plot_file;
  if (o.metrics_file.empty()) return (fs::path(metrics_path).parent_path() / "loss.svg").string();
  fs::path plot = fs::path(o.metrics_file).replace_extension(".svg");
  if (plot == fs::path(o.metrics_file)) plot += ".svg";  // a metrics file named *.svg
  return plot.string();
}

void validate(const TrainOptions& o) {
  if (o.model.empty()) throw UsageError("--model is empty");
  if (o.dataset.empty()) throw UsageError("--dataset is empty");
  if (!o.experiment_name.empty() && o.experiment_name.find('/') != std::string::npos) {
    throw UsageError("--experiment-name '" + o.experiment_name + "' must not contain '/'");
  }
  if (!o.grads_file.empty() && o.max_steps > 0 && o.grads_step > o.max_steps) {
    throw UsageError("--grads-step " + std::to_string(o.grads_step) + " is past --max-steps " +
                     std::to_string(o.max_steps) + ": --grads-file would never be written");
  }
  check_fsdp_options(o.strategy_options.fsdp, o.dtype);
  if (o.strategy == "pp") check_pp_options(o.strategy_options.pp, o.batch_size);
  refuse_replacing_metrics(o);
  // Every file the run writes is checked before it starts: a path that cannot be written is one
  // line, not an abort after the training it was meant to keep.
  check_output_folder("--save-dir", o.save_dir);
  check_output_file("--metrics-file", o.metrics_file);
  check_output_file("--plot-file", o.plot_file);
  check_output_file("--final-weights", o.final_weights);
  check_output_file("--grads-file", o.grads_file);
}

}  // namespace ddx::train
