// `ddx parity` on the command line.
#include <memory>

#include "ddx/errors/errors.h"
#include "harness/parity/parity.h"
#include "harness/parity/parity_command.h"

namespace ddx::cli {

Subcommand add_parity_command(CLI::App& app) {
  auto o = std::make_shared<parity::ParityOptions>();
  std::string variants_help = "Variants to check (default: all):";
  for (const auto& v : parity::registered_variants()) variants_help += " " + v.name;
  CLI::App* cmd = app.add_subcommand(
      "parity",
      "Check that every parallel strategy reproduces the single-device loss curve (runs each through "
      "ddx launch; exit 0 only when all are within tolerance; 2 when a strategy asked for can run at none of the "
      "world sizes).\n  ddx parity --strategies ddp,ddp-zero1 --world-sizes 2,4");
  cmd->add_option("--strategies", o->variants, variants_help)->delimiter(',');
  cmd->add_option("--world-sizes", o->world_sizes, "World sizes to run each variant at")
      ->delimiter(',')->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--model", o->model,
                  "Model preset or config.json for every variant (default: debug, and debug-tp / debug-pp for the "
                  "variants that need their head or block counts); a layout the model cannot take is a SKIP row");
  cmd->add_option("--steps", o->steps, "Optimizer steps per run")->check(CLI::Range(int64_t{1}, int64_t{100000}))->capture_default_str();
  cmd->add_option("--global-batch", o->global_batch, "Sequences per step (split over ranks and micro-steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--seq-length", o->seq_length, "Tokens per sequence")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Training dtype (fp64 separates a bug from rounding: tolerances scale with it)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp64"}))->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of weights and data order")->capture_default_str();
  cmd->add_option("--lr", o->lr, "Learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  cmd->add_option("--tolerance-rel", o->tolerance_rel, "Largest relative loss and gradient-norm difference per step")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--grad-tolerance", o->grads_tolerance,
                  "Largest step-1 gradient difference per tensor, relative to its largest element (default: 5e-6 "
                  "for fp32, scaled by machine epsilon for other dtypes)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--weight-tolerance", o->weight_tolerance,
                  "Largest final weight difference, in units of the largest single step AdamW can take")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--out", o->out_dir, "Folder for runs, report.json, junit.xml and loss.svg")->capture_default_str();
  auto* golden = cmd->add_option("--golden", o->golden, "Compare the baseline with this golden file");
  auto* save = cmd->add_option("--save-golden", o->save_golden, "Write the baseline curve and its environment here");
  golden->excludes(save);
  cmd->add_flag("--uneven-tokens", o->uneven_tokens,
                 "Mask a position-dependent prefix of each sequence's labels so ranks hold different token "
                 "counts (catches mean-of-means normalisation bugs)");
  cmd->add_flag("!--no-determinism", o->determinism, "Skip the run-to-run determinism check");
  cmd->add_option("--launcher", o->launcher,
                  "Command prefix that starts each multi-rank run, e.g. \"srun -N 2 --ntasks-per-node 2\" "
                  "(default: ddx launch --nproc-per-node N --); it must start the ranks of --world-sizes");
  cmd->add_option("--run-timeout", o->run_timeout_s, "Seconds before a run is killed")
      ->check(CLI::Range(1.0, 86400.0))->capture_default_str();
  return {cmd, [o]() { return parity::run_parity(*o); }};
}

}  // namespace ddx::cli
