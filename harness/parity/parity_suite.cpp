// The suite itself: baseline (twice, for determinism), golden check, every variant x world
// size, comparison and reports.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "ddx/processes/run_process.h"
#include "ddx/text/text.h"
#include "ddx/version.h"
#include "harness/common/output_folder.h"
#include "harness/parity/curves.h"
#include "harness/parity/parity.h"
#include "harness/parity/report.h"
#include "models/model_config.h"

namespace ddx::parity {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunPaths {
  std::string dir, metrics, weights, grads, log;
  RunFiles files() const { return {weights, grads}; }
};

// The suite's default model, and each variant's when the user names none.
const char* kDefaultModel = "debug";
std::string suite_model(const ParityOptions& o) { return o.model.empty() ? kDefaultModel : o.model; }
std::string variant_model(const ParityOptions& o, const Variant& v) {
  if (!o.model.empty()) return o.model;
  return v.model.empty() ? kDefaultModel : v.model;
}

Tolerances tolerances(const ParityOptions& o) {
  return {o.tolerance_rel, o.grads_tolerance >= 0 ? o.grads_tolerance : default_grads_tolerance(o.dtype),
          o.weight_tolerance};
}

RunPaths paths_for(const std::string& out_dir, const std::string& name) {
  RunPaths p;
  p.dir = out_dir + "/runs/" + name;
  p.metrics = p.dir + "/metrics.jsonl";
  p.weights = p.dir + "/final.safetensors";
  p.grads = p.dir + "/grads-step1.safetensors";
  p.log = p.dir + "/output.log";
  return p;
}

// The `ddx train` command line shared by every run: same model, seed, data, schedule.
std::vector<std::string> train_args(const ParityOptions& o, const std::string& model, const RunPaths& p,
                                    int64_t per_rank_batch, int64_t grad_accum) {
  return {"train", "--model", model, "--dtype", o.dtype, "--seed", std::to_string(o.seed),
          "--lr", std::to_string(o.lr), "--warmup-steps", "0", "-s", std::to_string(o.seq_length),
          "-b", std::to_string(per_rank_batch), "--grad-accum", std::to_string(grad_accum),
          "--max-steps", std::to_string(o.steps), "--log-freq", "1", "--checksum-freq", "1", "--no-progress",
          "--metrics-file", p.metrics, "--plot-file", p.dir + "/loss.svg", "--final-weights", p.weights,
          "--grads-file", p.grads, "--grads-step", "1", "--save-dir", p.dir + "/save"};
}

json environment(const ParityOptions& o) {
  return {{"ddx", ddx_version()}, {"libtorch", libtorch_version()}, {"backend", "gloo"}, {"dtype", o.dtype},
          {"model", suite_model(o)}, {"seed", o.seed}, {"steps", o.steps}, {"global_batch", o.global_batch},
          {"seq_length", o.seq_length}, {"lr", o.lr}, {"uneven_tokens", o.uneven_tokens}};
}

// The world size a run had, from its first metrics record (ddx train writes it on every step).
int64_t world_size_of(const std::string& metrics) {
  std::ifstream in(metrics);
  std::string first;
  std::getline(in, first);
  const json record = json::parse(first, nullptr, false);
  return record.is_object() && record.contains("world_size") ? record["world_size"].get<int64_t>() : -1;
}

// Runs one training job; returns its curve (empty when it failed) and fills `report`.
std::vector<StepPoint> execute(const std::string& ddx, const ParityOptions& o, const std::string& name, int world_size,
                               const std::vector<std::string>& train_argv, const RunPaths& p, RunReport& report) {
  fs::remove_all(p.dir);
  fs::create_directories(p.dir);
  std::vector<std::string> argv;
  if (world_size > 1 && !o.launcher.empty()) {
    argv = split_words(o.launcher);
  } else if (world_size > 1) {
    argv = {ddx, "launch", "--nproc-per-node", std::to_string(world_size), "--"};
  }
  argv.push_back(ddx);
  argv.insert(argv.end(), train_argv.begin(), train_argv.end());
  if (o.uneven_tokens) argv.push_back("--uneven-tokens");  // a data property every run shares
  std::printf("parity: %-18s at %d rank%s ... ", name.c_str(), world_size, world_size == 1 ? " " : "s");
  std::fflush(stdout);
  ProcessOutcome outcome = run_process(argv, {}, p.log, o.run_timeout_s);
  report.log_path = p.log;
  report.seconds = outcome.seconds;
  std::vector<StepPoint> curve;
  if (outcome.exit_code == 0) {
    try {
      curve = read_curve(p.metrics);
      // A --launcher decides the ranks itself: a run at another world size than the one it
      // stands for would compare the wrong thing.
      if (const int64_t ran = world_size_of(p.metrics); !curve.empty() && ran != world_size) {
        curve.clear();
        report.comparison.note = "--launcher '" + o.launcher + "' started " + std::to_string(ran) +
                                 " ranks, not the " + std::to_string(world_size) + " of --world-sizes";
      }
    } catch (const std::exception& e) {
      report.comparison.note = e.what();
    }
  } else {
    report.comparison.note = outcome.timed_out ? "timed out after " + std::to_string(o.run_timeout_s) + " s"
                                               : "exited with " + std::to_string(outcome.exit_code);
  }
  std::printf("%s (%.1f s)\n", curve.empty() ? "ERROR" : "done", outcome.seconds);
  if (curve.empty() && !report.comparison.note.empty()) std::printf("  %s\n", report.comparison.note.c_str());
  if (curve.empty()) std::printf("%s", tail_lines(p.log, 8).c_str());
  std::fflush(stdout);
  return curve;
}

// The golden file's curve, refused (before anything runs) when it was recorded with another
// configuration than this run's.
std::vector<StepPoint> read_golden(const std::string& path, const json& env) {
  if (!fs::exists(path)) throw UsageError("--golden " + path + " does not exist");
  std::ifstream in(path);
  json golden;
  try {
    in >> golden;
  } catch (const std::exception& e) {
    throw UsageError("--golden " + path + " is not a golden file: " + e.what());
  }
  for (const char* key : {"model", "seed", "dtype", "steps", "global_batch", "seq_length", "lr"}) {
    if (!golden.contains("environment") || golden["environment"].value(key, json()) != env[key]) {
      throw UsageError("--golden " + path + " was recorded with " + key + "=" +
                       golden["environment"].value(key, json()).dump() + ", this run has " + env[key].dump());
    }
  }
  std::vector<StepPoint> curve;
  for (const auto& s : golden.at("steps")) curve.push_back(step_point(s));
  return curve;
}

// A single-device run that variants are compared with.
struct Baseline {
  std::vector<StepPoint> curve;  // empty when it failed
  RunFiles files;
  RoundingEnvelope envelope;     // empty: the fixed tolerances alone
};

// The rounding envelope of a model's baseline (curves.h): the same single-device run with the
// batch in 2 and in 4 micro-steps, which reorders the sums and nothing else. Each is a row of
// the report; one that moves further than 100 times the per-step tolerance or a whole AdamW
// step in a weight (or whose step-1 gradients differ beyond rounding) is a FAIL, and the
// envelope is then left out, since accumulation itself is suspect.
void add_rounding_envelope(const std::string& ddx, const ParityOptions& o, const std::string& model, Baseline& b,
                           std::vector<RunReport>& reports) {
  const Tolerances fixed = tolerances(o);
  Tolerances sanity = fixed;
  sanity.loss_rel *= 100;
  sanity.weight_steps = 1.0;
  std::vector<Comparison> references;
  bool trusted = true;
  for (int64_t micro : {2, 4}) {
    if (o.global_batch % micro != 0) continue;
    RunReport r;
    r.name = "rounding-accum" + std::to_string(micro);
    r.strategy = "single";
    const RunPaths p = paths_for(o.out_dir, r.name + (model == suite_model(o) ? "" : "-" + model));
    r.curve = execute(ddx, o, r.name + (model == suite_model(o) ? "" : " " + model), 1,
                      train_args(o, model, p, o.global_batch / micro, micro), p, r);
    if (r.curve.empty()) {
      r.verdict = "ERROR";
      trusted = false;
    } else {
      const Comparison measured = compare_runs(b.curve, r.curve, b.files, p.files(), fixed);
      r.comparison = compare_runs(b.curve, r.curve, b.files, p.files(), sanity);
      r.verdict = r.comparison.passed ? "PASS" : "FAIL";
      if (!r.comparison.passed) {
        r.comparison.note = "rounding alone should not move a run this far (" + r.comparison.note +
                            "): gradient accumulation is suspect, the envelope is not used";
        trusted = false;
      }
      references.push_back(measured);
    }
    reports.push_back(r);
  }
  if (trusted) b.envelope = rounding_envelope(references);
}

Baseline run_baseline(const std::string& ddx, const ParityOptions& o, const std::string& model,
                      std::vector<RunReport>& reports) {
  RunReport r;
  const RunPaths p = paths_for(o.out_dir, "single-" + model);
  Baseline b;
  b.curve = execute(ddx, o, "single " + model, 1, train_args(o, model, p, o.global_batch, 1), p, r);
  b.files = p.files();
  if (!b.curve.empty()) add_rounding_envelope(ddx, o, model, b, reports);
  return b;
}

// One variant x world size the user asked for, decided before anything runs.
struct PlannedRun {
  const Variant* variant;
  int world_size;
  std::string model;
  std::string skip_reason;  // why this layout cannot run (unfit_reason); empty: it runs
};

// The SKIP row's line, printed where the run would have been.
void print_skip(const PlannedRun& plan) {
  std::printf("parity: %-18s at %d rank%s ... SKIP (%s)\n", plan.variant->name.c_str(), plan.world_size,
              plan.world_size == 1 ? " " : "s", plan.skip_reason.c_str());
  std::fflush(stdout);
}

RunReport run_variant(const std::string& ddx, const ParityOptions& o, const PlannedRun& plan, const Baseline& baseline) {
  const Variant& v = *plan.variant;
  const int n = plan.world_size;
  RunReport r;
  r.name = v.name;
  r.strategy = v.flags.size() >= 2 ? v.flags[1] : v.name;
  r.world_size = n;
  if (!plan.skip_reason.empty()) {
    r.verdict = "SKIP";
    r.comparison.note = plan.skip_reason;
    print_skip(plan);
    return r;
  }
  if (baseline.curve.empty()) {
    r.verdict = "ERROR";
    r.comparison.note = "the single-device baseline of model " + plan.model + " failed";
    return r;
  }
  const RunPaths p = paths_for(o.out_dir, v.name + "-x" + std::to_string(n));
  auto argv = train_args(o, plan.model, p, o.global_batch / (v.dp_size(n) * v.grad_accum), v.grad_accum);
  argv.insert(argv.end(), v.flags.begin(), v.flags.end());
  r.curve = execute(ddx, o, v.name, n, argv, p, r);
  if (r.curve.empty()) {
    r.verdict = "ERROR";
  } else {
    r.comparison = compare_runs(baseline.curve, r.curve, baseline.files, p.files(), tolerances(o), baseline.envelope);
    r.verdict = r.comparison.passed ? "PASS" : "FAIL";
  }
  return r;
}

// The variants --strategies names (every registered one when it names none).
std::vector<Variant> requested_variants(const ParityOptions& o) {
  if (o.variants.empty()) return registered_variants();
  std::vector<Variant> variants;
  for (const std::string& name : o.variants) {
    bool found = false;
    for (const Variant& v : registered_variants()) {
      if (v.name == name) {
        variants.push_back(v);
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const Variant& v : registered_variants()) known += (known.empty() ? "" : ", ") + v.name;
      throw UsageError("--strategies " + name + " is not one of: " + known);
    }
  }
  return variants;
}

// Every variant x world size, with the reason each one that cannot run is skipped. A strategy
// named in --strategies that runs at none of the world sizes would leave a CI job green without
// having tested it (and with none named, the suite must still run something): its SKIP rows are
// shown and the request is refused (exit 2) before the baseline runs.
std::vector<PlannedRun> plan_runs(const ParityOptions& o, const std::vector<Variant>& variants) {
  std::vector<PlannedRun> plan;
  for (const Variant& v : variants) {
    for (int n : o.world_sizes) {
      const std::string model = variant_model(o, v);
      plan.push_back({&v, n, model, unfit_reason(v, model, n, o)});
    }
  }
  std::vector<std::string> never_run;
  for (const Variant& v : variants) {
    const bool runs = std::any_of(plan.begin(), plan.end(),
                                  [&](const PlannedRun& p) { return p.variant == &v && p.skip_reason.empty(); });
    if (!runs) never_run.push_back(v.name);
  }
  const bool nothing_runs = never_run.size() == variants.size();
  if (!nothing_runs && (o.variants.empty() || never_run.empty())) return plan;
  for (const PlannedRun& p : plan) {
    if (p.skip_reason.empty()) continue;
    if (std::find(never_run.begin(), never_run.end(), p.variant->name) != never_run.end()) print_skip(p);
  }
  std::vector<std::string> sizes;
  for (int n : o.world_sizes) sizes.push_back(std::to_string(n));
  const std::string at = " at --world-sizes " + join(sizes, ",");
  if (o.variants.empty()) throw UsageError("no strategy can run" + at + ": nothing would be checked (the SKIP rows above say why)");
  throw UsageError("--strategies " + join(never_run, ",") + " cannot run" + at + ": nothing would check " +
                   (never_run.size() == 1 ? "it" : "them") + " (the SKIP rows above say why)");
}

// The baseline run again: the same configuration must give bit-identical parameters at every step.
RunReport determinism_row(const std::string& ddx, const ParityOptions& o, const std::vector<StepPoint>& baseline,
                          const RunPaths& base_paths) {
  RunReport r;
  r.name = "determinism";
  r.strategy = "single";
  const RunPaths p = paths_for(o.out_dir, "single-again");
  r.curve = execute(ddx, o, "single (again)", 1, train_args(o, suite_model(o), p, o.global_batch, 1), p, r);
  r.comparison = compare_runs(baseline, r.curve, base_paths.files(), p.files(), Tolerances{0, 0, 0});
  for (size_t i = 0; i < std::min(baseline.size(), r.curve.size()); ++i) {
    if (baseline[i].param_checksum != r.curve[i].param_checksum) {
      r.comparison.passed = false;
      r.comparison.note = "parameter checksums differ at step " + std::to_string(baseline[i].step);
      if (r.comparison.first_bad_step < 0) r.comparison.first_bad_step = baseline[i].step;
      break;
    }
  }
  r.verdict = r.curve.empty() ? "ERROR" : (r.comparison.passed ? "PASS" : "FAIL");
  return r;
}

RunReport golden_row(const ParityOptions& o, const std::vector<StepPoint>& golden_curve,
                     const std::vector<StepPoint>& baseline) {
  RunReport r;
  r.name = "golden";
  r.strategy = "single";
  r.curve = baseline;
  r.comparison = compare_runs(golden_curve, baseline, {}, {}, tolerances(o));
  r.verdict = r.comparison.passed ? "PASS" : "FAIL";
  if (!r.comparison.passed && r.comparison.note.empty()) r.comparison.note = "the baseline moved away from the golden curve";
  return r;
}

// Each planned run in order, with the single-device run of each model a variant needs (the
// suite's is given), started the first time a run needs it.
void run_planned(const std::string& ddx, const ParityOptions& o, const std::vector<PlannedRun>& plan,
                 std::map<std::string, Baseline>& baselines, std::vector<RunReport>& reports) {
  static const Baseline none;  // a skipped layout needs no baseline: it only reports why it cannot run
  for (const PlannedRun& p : plan) {
    if (p.skip_reason.empty() && !baselines.count(p.model)) baselines[p.model] = run_baseline(ddx, o, p.model, reports);
    auto found = baselines.find(p.model);
    reports.push_back(run_variant(ddx, o, p, found == baselines.end() ? none : found->second));
  }
}

void write_outputs(const ParityOptions& o, const std::vector<StepPoint>& baseline, const std::vector<RunReport>& reports,
                   const json& env) {
  const Tolerances tol = tolerances(o);
  print_table(reports, tol);
  write_report_json(o.out_dir + "/report.json", baseline, reports, tol, env.dump());
  write_junit(o.out_dir + "/junit.xml", reports, tol);
  write_parity_plot(o.out_dir + "/loss.svg", baseline, reports);
  std::printf("parity: report %s/report.json, JUnit %s/junit.xml, plot %s/loss.svg\n", o.out_dir.c_str(),
              o.out_dir.c_str(), o.out_dir.c_str());
  if (o.save_golden.empty()) return;
  json steps = json::array();
  for (const auto& p : baseline) {
    steps.push_back({{"step", p.step}, {"loss", p.loss}, {"grad_norm", p.grad_norm}, {"lr", p.lr},
                     {"param_checksum", p.param_checksum}});
  }
  write_file_atomically(o.save_golden, json({{"format", "ddx-parity-golden"}, {"environment", env}, {"steps", steps}}).dump(2) + "\n");
  std::printf("parity: golden curve written to %s\n", o.save_golden.c_str());
}

}  // namespace

int run_parity(const ParityOptions& o) {
  // Validate the whole matrix, and where its results go, before running anything.
  if (!o.model.empty()) models::resolve_model_config(o.model);  // a bad --model: one line, nothing run
  check_output_folder("--out", o.out_dir);
  check_output_file("--save-golden", o.save_golden);
  const std::vector<Variant> variants = requested_variants(o);
  const std::vector<PlannedRun> plan = plan_runs(o, variants);
  const json env = environment(o);
  const std::vector<StepPoint> golden_curve = o.golden.empty() ? std::vector<StepPoint>{} : read_golden(o.golden, env);
  // Every run writes into an empty --out: an earlier run's runs/ are moved aside whole, never
  // mixed in with this run's and never deleted (the same rule as ddx validate's --out).
  if (const std::string moved = harness::fresh_output_folder("--out", o.out_dir); !moved.empty()) {
    std::printf("ddx parity: %s held an earlier run's files: moved them to %s\n", o.out_dir.c_str(), moved.c_str());
    std::fflush(stdout);
  }
  const std::string ddx = self_executable();

  std::vector<RunReport> reports;
  // The baseline: one process holding everything.
  RunReport base_report;
  const RunPaths base_paths = paths_for(o.out_dir, "single");
  const std::string model = suite_model(o);
  const auto baseline = execute(ddx, o, "single", 1, train_args(o, model, base_paths, o.global_batch, 1), base_paths, base_report);
  if (baseline.empty()) {
    std::fprintf(stderr, "ddx parity: the single-device baseline failed (%s); see %s\n",
                 base_report.comparison.note.c_str(), base_paths.log.c_str());
    return 1;
  }
  if (o.determinism) reports.push_back(determinism_row(ddx, o, baseline, base_paths));
  if (!o.golden.empty()) reports.push_back(golden_row(o, golden_curve, baseline));

  std::map<std::string, Baseline> baselines = {{model, {baseline, base_paths.files(), {}}}};
  add_rounding_envelope(ddx, o, model, baselines[model], reports);
  run_planned(ddx, o, plan, baselines, reports);
  write_outputs(o, baseline, reports, env);
  for (const RunReport& r : reports) {
    if (r.verdict != "PASS" && r.verdict != "SKIP") return 1;  // SKIP: this layout cannot run (the row says why)
  }
  return 0;
}

}  // namespace ddx::parity
