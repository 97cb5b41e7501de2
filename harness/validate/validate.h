#pragma once
// `ddx validate`: cluster acceptance in one command. Runs the existing commands as stages, in
// order, each under the chosen launcher with its own report writer: doctor, selfcheck, compute
// and memory (every rank's matmul and memory bandwidth; a slow rank or host is named), bandwidth (all collectives; busbw at the largest size against the floor of --expect or of
// the detected link type, link_types.h), the pairwise link matrix, a short parity run and a
// short training burn-in with the flight recorder dumping into <out>/traces. One PASS/FAIL
// line per stage as it goes; stops at the first FAIL unless --keep-going; then one report:
// validate.json, validate.md and a self-contained validate.html (tables and inline plots).
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace ddx::validate {

struct ValidateOptions {
  int nproc = 2;
  std::string launcher;   // a command prefix ("mpiexec -n 4"); empty: ddx launch -np <nproc> --
  std::string out_dir = "validate-report";
  bool keep_going = false;
  std::string expect;     // --expect: a link type or GB/s; empty: detected from the doctor
  std::string max_bytes = "1M";
  int parity_steps = 3;
  int burn_in_steps = 20;
  double stage_timeout_s = 600;
  std::string junit_path;     // --junit: one test case per stage and per check
  std::string expectations_path;  // --expectations: rows added to the shipped per-SKU table
  std::string baseline_path;  // --baseline: an earlier validate.json of the same cluster
  double baseline_margin = 0.10;  // a figure this much worse than the baseline's FAILs
};

struct Stage {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> artefacts;  // files the stage writes, relative to out_dir
  std::string summary_marker;          // starts the command's own summary line ("selfcheck: ")
  std::map<std::string, std::string> env;  // added to the stage's environment
};

struct StageResult {
  std::string name;
  bool passed = false;
  bool ran = false;       // false: skipped after an earlier FAIL
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string log;        // relative to out_dir
  std::string summary;    // the stage's own last output line
  std::vector<std::string> artefacts;
  nlohmann::json details;  // bandwidth: the threshold and busbw per collective; baseline: the regressions
};

// A stage's JSON artefact, or null JSON when it is missing or not JSON (a stage that failed
// before writing it): readers then show nothing rather than stop the report.
nlohmann::json read_json(const std::string& path);

// The stages for these options; `ddx` is the binary to run.
std::vector<Stage> plan_stages(const ValidateOptions& options, const std::string& ddx);

// A figure a later run can be compared with (higher is better), and the relative jitter its own
// run saw: how far the median trial fell below the best (compute, memory), the iterations'
// coefficient of variation (bandwidth), the links' MAD / median (pairwise).
struct Figure {
  double value = 0;
  double jitter = 0;
};

// Every figure of a run, keyed so that the same rank of the same cluster gets the same key
// whatever its rank number ("compute fp32 n=512 TFLOP/s @ host:0", "bandwidth all_reduce busbw GB/s").
std::map<std::string, Figure> figures_of(const ValidateOptions& options, const std::vector<StageResult>& results);
nlohmann::json to_json(const std::map<std::string, Figure>& figures);

// How far below the baseline a figure may fall: the margin, or 3x the larger jitter of the two
// runs when that is more (a figure this machine cannot measure steadily is not failed for
// moving within its noise), at most 90 %.
double allowed_drop(const Figure& before, const Figure& now, double margin);

// The figures of an earlier run's validate.json. Throws UsageError naming the file when it is
// unreadable, not JSON, or has no figures (a validate.json from before baselines existed).
std::map<std::string, Figure> read_baseline(const std::string& path);

// The "baseline" stage: this run's figures against the earlier run's. It FAILs when a figure
// fell by more than allowed_drop(); details list every regression with before, after and the
// drop allowed, and the figures the earlier run had that this one lacks.
StageResult compare_with_baseline(const std::map<std::string, Figure>& now, const std::map<std::string, Figure>& before,
                                  double margin);

// Writes validate.json (with the run's figures, so it can be a later run's baseline),
// validate.md and validate.html into out_dir (atomically).
void write_report(const ValidateOptions& options, const std::vector<StageResult>& results);

// The JUnit XML of a run: one case per stage, per doctor check, per bandwidth collective, per
// compute and memory figure, and per baseline regression.
std::string junit_report(const ValidateOptions& options, const std::vector<StageResult>& results);

}  // namespace ddx::validate
