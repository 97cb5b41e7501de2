// `ddx validate` on the command line: plan the stages, run them one after another (each with
// a hard timeout, its output in <out>/<stage>.log), print a line per stage, write the report.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <memory>

#include "ddx/processes/atomic_file.h"
#include "ddx/text/byte_sizes.h"
#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "ddx/processes/run_process.h"
#include "ddx/text/text.h"
#include "harness/common/analyze_verdict.h"
#include "harness/common/output_folder.h"
#include "harness/validate/expectations.h"
#include "harness/validate/link_types.h"
#include "harness/validate/validate.h"
#include "harness/validate/validate_command.h"

namespace ddx::cli {
namespace {

std::string log_name(const std::string& stage) {
  std::string name = stage;
  for (char& c : name) {
    if (c == ' ') c = '-';
  }
  return name + ".log";
}

// The command's own summary: the last line that starts (after any "[rank 0]: " prefix) with
// the stage's marker and goes on with a count; else the first one-line error a rank printed
// ("ddx: error: ..."), the cause, rather than the launcher's table after it; else the log's
// last line.
std::string summary_line(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string found, first_error, last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    last = line;
    if (const size_t e = line.find("ddx: error: "); first_error.empty() && e != std::string::npos) first_error = line.substr(e);
    const size_t at = line.find(marker);
    if (at != std::string::npos && at + marker.size() < line.size() &&
        std::isdigit(static_cast<unsigned char>(line[at + marker.size()])) != 0) {
      found = line.substr(at);
    } else if (at != std::string::npos && marker[0] == '#') {
      found = line.substr(at);  // bandwidth: "# ddx probe bandwidth: OK (...)"
    }
  }
  return !found.empty() ? found : !first_error.empty() ? first_error : last;
}

// The pairwise probe's verdict, "# ddx probe bandwidth --pairs: OK (1 links, 0 slow, 0 slow
// ranks)" (a comment line of its nccl-tests style output), read like the other stages' summaries:
// "pairwise: 1 links, 0 slow, 0 slow ranks". Anything else (an error line) is kept as it is.
std::string pairwise_summary(const std::string& line, const std::string& marker) {
  if (line.rfind(marker, 0) != 0 || line.back() != ')') return line;
  const std::string verdict = line.substr(marker.size());
  const size_t open = verdict.find(" (");
  if (open == std::string::npos) return line;
  return "pairwise: " + verdict.substr(open + 2, verdict.size() - open - 3);
}

// The bandwidth stage passes only when every collective's busbw at the largest size reaches the
// floor; the floor comes from --expect or from the link type the doctor's facts show.
void judge_bandwidth(const validate::ValidateOptions& o, validate::StageResult& r) {
  const validate::Expectation e = o.expect.empty()
                                      ? validate::detect_expectation(validate::read_json(o.out_dir + "/doctor.json"))
                                      : validate::parse_expect(o.expect);
  const auto verdict = validate::judge_busbw(validate::read_json(o.out_dir + "/bandwidth.json"), e);
  r.passed = r.passed && verdict.passed;
  r.summary = verdict.summary;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : verdict.rows) {
    rows.push_back({{"collective", row.collective}, {"bytes", row.bytes}, {"busbw_gbs", row.busbw_gbs}, {"ok", row.ok}});
  }
  r.details = {{"min_busbw_gbs", e.min_busbw_gbs}, {"threshold_source", e.source}, {"judged", verdict.judged},
               {"min_bytes", e.min_bytes}, {"collectives", rows}};
}

// compute / memory: each rank's figures as a fraction of its device's datasheet peak where the
// expectations table knows the device (expectations.h); said so where it does not.
void add_fraction_of_peak(const validate::ValidateOptions& o, const std::vector<validate::SkuExpectation>& table,
                          validate::StageResult& r) {
  const nlohmann::json j = validate::read_json(o.out_dir + "/" + r.name + ".json");
  if (!j.is_object() || !j.contains("ranks") || j["ranks"].empty()) return;
  nlohmann::json fractions = nlohmann::json::array();
  std::string best_text, unknown;
  double best = -1;
  for (const auto& rank : j["ranks"]) {
    const std::string device = rank.value("device", "");
    const validate::SkuExpectation* sku = validate::find_sku(table, device);
    if (!sku) {
      unknown = device;
      continue;
    }
    for (const auto& [key, m] : rank["metrics"].items()) {
      // compute: "<dtype>_n<size>" against the dtype's peak; memory: device copy/triad against HBM.
      const std::string dtype = key.substr(0, key.find('_'));
      double peak = 0;
      if (r.name == "compute" && sku->peak_tflops.count(dtype)) peak = sku->peak_tflops.at(dtype);
      if (r.name == "memory" && key.rfind("device_", 0) == 0) peak = sku->memory_gbs;
      if (peak <= 0) continue;
      const double value = m["best"].get<double>(), fraction = value / peak;
      fractions.push_back({{"metric", key}, {"rank", rank["rank"]}, {"value", value}, {"peak", peak},
                           {"fraction", fraction}, {"sku", sku->sku}, {"source", sku->source}});
      if (fraction > best) {
        best = fraction;
        best_text = printf_text("%s %.4g = %.0f%% of %s's %.4g (%s)", key.c_str(), value, fraction * 100, sku->sku.c_str(),
                                peak, sku->source.c_str());
      }
    }
  }
  r.details["of_peak"] = fractions;
  if (best >= 0) {
    r.summary += "; best " + best_text;
  } else if (!unknown.empty()) {
    r.details["of_peak_note"] = "no expected figures for '" + unknown + "': add a row with --expectations FILE";
  }
}

// A burn-in that failed with flight-recorder dumps: `ddx analyze` names the culprit.
void analyze_traces(const validate::ValidateOptions& o, validate::StageResult& r) {
  const std::string traces = o.out_dir + "/traces";
  if (!std::filesystem::exists(traces)) return;
  // The report for people, and the same diagnosis as JSON, whose verdict line ("VERDICT:
  // never-joined: rank 1 ...") becomes the stage's summary.
  run_process({self_executable(), "analyze", traces}, {}, o.out_dir + "/analyze.log", 120);
  const harness::AnalyzeVerdict verdict = harness::analyze_traces(traces, o.out_dir + "/analyze.json");
  if (verdict.problem_found && !verdict.line.empty()) r.summary = verdict.line;
  r.artefacts.push_back("analyze.log");
  r.artefacts.push_back("analyze.json");
}

// `ddx validate` starts every stage's ranks itself: started as one rank of a launched job it
// would run once per rank, each copy launching its own ranks and writing the same report. The
// launcher's variables that say so ("rank 1 of 2 (RANK/WORLD_SIZE)"), or "" for one process.
std::string launched_rank(const EnvMap& env) {
  struct Launcher {
    const char* rank;
    const char* size;
  };
  // srun sets SLURM_STEP_NUM_TASKS for a step's tasks; a batch script (one task, the place to
  // run validate --launcher srun from) has no step of its own.
  static const Launcher launchers[] = {{"RANK", "WORLD_SIZE"},
                                       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                       {"PMI_RANK", "PMI_SIZE"},
                                       {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
  for (const Launcher& l : launchers) {
    const auto size = env_get(env, l.size);
    if (!size) continue;
    const long long n = parse_int(l.size, *size, 0, 1 << 30);
    if (n <= 1) continue;
    const std::string rank = env_get(env, l.rank).value_or("?");
    return "rank " + rank + " of " + std::to_string(n) + " (" + l.rank + "/" + l.size + ")";
  }
  return "";
}

int run_stages(const validate::ValidateOptions& o, const std::vector<validate::SkuExpectation>& table,
               const std::map<std::string, validate::Figure>& baseline);

// `path` relative to the folder `dir` when it lies inside it, else "".
std::string relative_inside(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path rel = fs::weakly_canonical(path, ec).lexically_relative(fs::weakly_canonical(dir, ec));
  return ec || rel.empty() || *rel.begin() == ".." ? "" : rel.string();
}

// Every stage writes into an empty --out, and validate reads back only what this run wrote: an
// earlier run's files there (the default folder makes that the common case) are moved aside, never
// judged and never deleted. A --baseline among them was read already; the report names it where
// it now is.
void start_in_fresh_folder(validate::ValidateOptions& o) {
  const std::string baseline_inside = o.baseline_path.empty() ? "" : relative_inside(o.baseline_path, o.out_dir);
  const std::string moved = harness::fresh_output_folder("--out", o.out_dir);
  if (moved.empty()) return;
  std::string baseline_note;
  if (!baseline_inside.empty()) {
    o.baseline_path = moved + "/" + baseline_inside;
    baseline_note = "; the --baseline is read from there: " + o.baseline_path;
  }
  std::printf("ddx validate: %s held an earlier run's files: moved them to %s%s\n", o.out_dir.c_str(), moved.c_str(),
              baseline_note.c_str());
  std::fflush(stdout);
}

int run_validate(const validate::ValidateOptions& o) {
  if (const std::string rank = launched_rank(current_env()); !rank.empty()) {
    throw UsageError("ddx validate was started as " + rank +
                     ", but it launches every stage's ranks itself: run it once, outside the launcher (ddx validate "
                     "--np N, or --launcher \"srun\" / \"mpiexec -n N\" from one process)");
  }
  const size_t max_bytes = ddx::parse_bytes("--max-bytes", o.max_bytes);  // bad input stops before any stage
  if (!o.expect.empty()) {  // so does a bad --expect, or one the sweep cannot judge
    const validate::Expectation e = validate::parse_expect(o.expect);
    const std::string small = validate::too_small_for(e, static_cast<double>(max_bytes));
    if (!small.empty()) throw UsageError(small);
  }
  // Expected figures per device (shipped, plus --expectations): a bad file stops the run here.
  const std::vector<validate::SkuExpectation> table =
      o.expectations_path.empty() ? validate::shipped_expectations() : validate::expectations_with(o.expectations_path);
  // A baseline that cannot be read stops the run before its first stage, not after the last;
  // read before --out is made fresh, since it may be the earlier report in that folder.
  const std::map<std::string, validate::Figure> baseline =
      o.baseline_path.empty() ? std::map<std::string, validate::Figure>{} : validate::read_baseline(o.baseline_path);
  check_output_file("--junit", o.junit_path);  // not after every stage has run
  validate::ValidateOptions fresh = o;
  start_in_fresh_folder(fresh);
  return run_stages(fresh, table, baseline);
}

int run_stages(const validate::ValidateOptions& o, const std::vector<validate::SkuExpectation>& table,
               const std::map<std::string, validate::Figure>& baseline) {
  const auto stages = validate::plan_stages(o, self_executable());
  // Known before the first stage, so every line says "k of n" with the same n.
  const size_t total = stages.size() + (o.baseline_path.empty() ? 0 : 1);
  std::vector<validate::StageResult> results;
  bool failed = false;
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& stage = stages[i];
    validate::StageResult r;
    r.name = stage.name;
    if (failed && !o.keep_going) {
      results.push_back(r);
      continue;
    }
    std::printf("[%zu/%zu] %-15s ...", i + 1, total, stage.name.c_str());
    std::fflush(stdout);
    r.ran = true;
    r.log = log_name(stage.name);
    const auto outcome = run_process(stage.argv, stage.env, o.out_dir + "/" + r.log, o.stage_timeout_s);
    r.exit_code = outcome.exit_code;
    r.timed_out = outcome.timed_out;
    r.seconds = outcome.seconds;
    r.passed = outcome.exit_code == 0;
    r.summary = outcome.timed_out ? "timed out after " + std::to_string(static_cast<int>(o.stage_timeout_s)) + " s"
                                  : summary_line(o.out_dir + "/" + r.log, stage.summary_marker);
    for (const auto& a : stage.artefacts) {
      if (std::filesystem::exists(o.out_dir + "/" + a)) r.artefacts.push_back(a);
    }
    if (stage.name == "bandwidth" && r.passed) judge_bandwidth(o, r);
    if (stage.name == "pairwise links") r.summary = pairwise_summary(r.summary, stage.summary_marker);
    if (stage.name == "compute" || stage.name == "memory") add_fraction_of_peak(o, table, r);
    if (stage.name == "burn-in" && !r.passed) analyze_traces(o, r);
    std::printf(" %s (%.1f s)  %s\n", r.passed ? "PASS" : "FAIL", r.seconds, r.summary.c_str());
    if (!r.passed) std::printf("      log: %s/%s\n", o.out_dir.c_str(), r.log.c_str());
    std::fflush(stdout);
    failed = failed || !r.passed;
    results.push_back(r);
  }
  if (!o.baseline_path.empty()) {
    validate::StageResult b = validate::compare_with_baseline(validate::figures_of(o, results), baseline, o.baseline_margin);
    b.details["baseline"] = o.baseline_path;
    std::printf("[%zu/%zu] %-15s ... %s  %s\n", total, total, "baseline", b.passed ? "PASS" : "FAIL",
                b.summary.c_str());
    for (const auto& g : b.details["regressions"]) {
      std::printf("      %s: %.4g -> %.4g (%+.0f%%)\n", g["figure"].get<std::string>().c_str(), g["before"].get<double>(),
                  g["after"].get<double>(), g["change"].get<double>() * 100);
    }
    failed = failed || !b.passed;
    results.push_back(b);
  }
  validate::write_report(o, results);
  if (!o.junit_path.empty()) write_file_atomically(o.junit_path, validate::junit_report(o, results));
  std::printf("validate: %s; report %s/validate.html (also validate.json, validate.md)\n", failed ? "FAIL" : "PASS",
              o.out_dir.c_str());
  return failed ? 1 : 0;
}

}  // namespace

Subcommand add_validate_command(CLI::App& app) {
  auto o = std::make_shared<validate::ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Cluster acceptance: doctor, selfcheck, per-rank compute and memory (the slow rank or host named), bandwidth sweep of every collective against the "
      "link's busbw floor, pairwise link matrix, a short parity run and a training burn-in; one "
      "PASS/FAIL line per stage, one report (HTML, JSON, Markdown).\n  ddx validate --np 4");
  cmd->add_option("-p,--nproc,--np", o->nproc, "Ranks (on this node under ddx launch)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--launcher", o->launcher,
                  "Command prefix that starts the ranks of a stage, e.g. \"mpiexec -n 4\" or \"srun\" "
                  "(default: ddx launch -np N --); under srun, --np defaults to SLURM_NTASKS");
  cmd->add_option("--out", o->out_dir, "Folder for the report and every stage's log and artefacts")->capture_default_str();
  cmd->add_flag("--keep-going", o->keep_going, "Run every stage even after a FAIL");
  std::string types;
  for (const auto& t : validate::link_types()) types += (types.empty() ? "" : ", ") + t.name;
  cmd->add_option("--expect", o->expect,
                  "The busbw every collective must reach at the largest size: a link type (" + types +
                      ") or GB/s (e.g. 25); default: the link type detected from the doctor's facts");
  cmd->add_option("--max-bytes", o->max_bytes, "Largest message of the bandwidth stages (K/M/G)")->capture_default_str();
  cmd->add_option("--parity-steps", o->parity_steps, "Optimizer steps of the parity stage")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--burn-in-steps", o->burn_in_steps, "Optimizer steps of the training burn-in stage")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--stage-timeout", o->stage_timeout_s, "Seconds before a stage is killed and FAILs")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--baseline", o->baseline_path,
                  "An earlier run's validate.json: every figure (per rank by host and local rank, per collective) "
                  "worse than it was by more than --baseline-margin FAILs, with before and after");
  cmd->add_option("--baseline-margin", o->baseline_margin, "Fraction a figure may fall below the baseline's")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  cmd->add_option("--expectations", o->expectations_path,
                  "A JSON list of rows of expected figures per device (sku, match, peak_tflops per dtype, memory_gbs, "
                  "source): added to the shipped table, or replacing its row of the same sku");
  cmd->add_option("--junit", o->junit_path, "Also write JUnit XML: one test case per stage and per check");
  return {cmd, [o, cmd]() {
            // Under srun the allocation says how many ranks a stage has (SLURM_NTASKS of the
            // batch script's job) unless --np says otherwise: the parity stage and the report
            // need the number.
            if (cmd->count("--np") == 0 && !o->launcher.empty()) {
              const auto words = split_words(o->launcher);
              const auto tasks = env_get(current_env(), "SLURM_NTASKS");
              if (!words.empty() && std::filesystem::path(words[0]).filename() == "srun" && tasks) {
                o->nproc = static_cast<int>(parse_int("SLURM_NTASKS", *tasks, 1, 4096));
                std::printf("ddx validate: %d ranks per stage (SLURM_NTASKS=%s) under '%s'\n", o->nproc,
                            tasks->c_str(), o->launcher.c_str());
              }
            }
            return run_validate(*o);
          }};
}

}  // namespace ddx::cli
