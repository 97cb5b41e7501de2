#pragma once
// `ddx validate`: cluster acceptance in one command. Runs the existing commands as stages, in
// order, each under the chosen launcher with its own report writer: doctor, selfcheck,
// bandwidth (all collectives, --min-busbw threshold), the pairwise link matrix and a short
// parity run. One PASS/FAIL line per stage as it goes; stops at the first FAIL unless
// --keep-going; then one report (validate.json + validate.md linking every stage's artefacts).
#include <string>
#include <vector>

namespace ddx::validate {

struct ValidateOptions {
  int nproc = 2;
  std::string launcher;   // a command prefix ("mpiexec -n 4"); empty: ddx launch -np <nproc> --
  std::string out_dir = "validate-report";
  bool keep_going = false;
  double min_busbw = 0;   // GB/s, every collective's average; 0: no threshold
  std::string max_bytes = "1M";
  int parity_steps = 3;
  double stage_timeout_s = 600;
};

struct Stage {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> artefacts;  // files the stage writes, relative to out_dir
  std::string summary_marker;          // starts the command's own summary line ("selfcheck: ")
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
};

// The stages for these options; `ddx` is the binary to run.
std::vector<Stage> plan_stages(const ValidateOptions& options, const std::string& ddx);

// Writes validate.json and validate.md into out_dir (atomically).
void write_report(const ValidateOptions& options, const std::vector<StageResult>& results);

}  // namespace ddx::validate
