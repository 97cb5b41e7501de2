// `ddx validate` on the command line: plan the stages, run them one after another (each with
// a hard timeout, its output in <out>/<stage>.log), print a line per stage, write the report.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "parity/run_process.h"
#include "validate/validate.h"

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
// the stage's marker and goes on with a count; else the log's last line.
std::string summary_line(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string found, last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    last = line;
    const size_t at = line.find(marker);
    if (at != std::string::npos && at + marker.size() < line.size() &&
        std::isdigit(static_cast<unsigned char>(line[at + marker.size()])) != 0) {
      found = line.substr(at);
    } else if (at != std::string::npos && marker[0] == '#') {
      found = line.substr(at);  // bandwidth: "# ddx probe bandwidth: OK (...)"
    }
  }
  return found.empty() ? last : found;
}

int run_validate(const validate::ValidateOptions& o) {
  std::filesystem::create_directories(o.out_dir);
  const auto stages = validate::plan_stages(o, parity::self_executable());
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
    std::printf("[%zu/%zu] %-15s ...", i + 1, stages.size(), stage.name.c_str());
    std::fflush(stdout);
    r.ran = true;
    r.log = log_name(stage.name);
    const auto outcome = parity::run_process(stage.argv, {}, o.out_dir + "/" + r.log, o.stage_timeout_s);
    r.exit_code = outcome.exit_code;
    r.timed_out = outcome.timed_out;
    r.seconds = outcome.seconds;
    r.passed = outcome.exit_code == 0;
    r.summary = outcome.timed_out ? "timed out after " + std::to_string(static_cast<int>(o.stage_timeout_s)) + " s"
                                  : summary_line(o.out_dir + "/" + r.log, stage.summary_marker);
    for (const auto& a : stage.artefacts) {
      if (std::filesystem::exists(o.out_dir + "/" + a)) r.artefacts.push_back(a);
    }
    std::printf(" %s (%.1f s)  %s\n", r.passed ? "PASS" : "FAIL", r.seconds, r.summary.c_str());
    if (!r.passed) std::printf("      log: %s/%s\n", o.out_dir.c_str(), r.log.c_str());
    std::fflush(stdout);
    failed = failed || !r.passed;
    results.push_back(r);
  }
  validate::write_report(o, results);
  std::printf("validate: %s; report %s/validate.json, %s/validate.md\n", failed ? "FAIL" : "PASS", o.out_dir.c_str(),
              o.out_dir.c_str());
  return failed ? 1 : 0;
}

}  // namespace

Subcommand add_validate_command(CLI::App& app) {
  auto o = std::make_shared<validate::ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Cluster acceptance: doctor, selfcheck, bandwidth sweep of every collective, pairwise link "
      "matrix and a short parity run, one PASS/FAIL line per stage, one report.\n  ddx validate --np 4");
  cmd->add_option("-p,--nproc,--np", o->nproc, "Ranks (on this node under ddx launch)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--launcher", o->launcher,
                  "Command prefix that starts the ranks of a stage, e.g. \"mpiexec -n 4\" or \"srun\" "
                  "(default: ddx launch -np N --); parity always uses ddx launch");
  cmd->add_option("--out", o->out_dir, "Folder for the report and every stage's log and artefacts")->capture_default_str();
  cmd->add_flag("--keep-going", o->keep_going, "Run every stage even after a FAIL");
  cmd->add_option("--min-busbw", o->min_busbw, "Fail the bandwidth stage when a collective's average busbw is below this GB/s")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--max-bytes", o->max_bytes, "Largest message of the bandwidth stages (K/M/G)")->capture_default_str();
  cmd->add_option("--parity-steps", o->parity_steps, "Optimizer steps of the parity stage")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--stage-timeout", o->stage_timeout_s, "Seconds before a stage is killed and FAILs")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  return {cmd, [o]() { return run_validate(*o); }};
}

}  // namespace ddx::cli
