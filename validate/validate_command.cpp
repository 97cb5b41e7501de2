// `ddx validate` on the command line: plan the stages, run them one after another (each with
// a hard timeout, its output in <out>/<stage>.log), print a line per stage, write the report.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <memory>

#include "bandwidth/sizes.h"
#include "cli/commands.h"
#include "ddx/env.h"
#include "ddx/errors.h"
#include "ddx/text.h"
#include "parity/run_process.h"
#include "validate/link_types.h"
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

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
}

// The bandwidth stage passes only when every collective's busbw at the largest size reaches the
// floor; the floor comes from --expect or from the link type the doctor's facts show.
void judge_bandwidth(const validate::ValidateOptions& o, validate::StageResult& r) {
  const validate::Expectation e = o.expect.empty()
                                      ? validate::detect_expectation(read_json(o.out_dir + "/doctor.json"))
                                      : validate::parse_expect(o.expect);
  const auto verdict = validate::judge_busbw(read_json(o.out_dir + "/bandwidth.json"), e);
  r.passed = r.passed && verdict.passed;
  r.summary = verdict.summary;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : verdict.rows) {
    rows.push_back({{"collective", row.collective}, {"bytes", row.bytes}, {"busbw_gbs", row.busbw_gbs}, {"ok", row.ok}});
  }
  r.details = {{"min_busbw_gbs", e.min_busbw_gbs}, {"threshold_source", e.source}, {"judged", verdict.judged},
               {"min_bytes", e.min_bytes}, {"collectives", rows}};
}

// A burn-in that failed with flight-recorder dumps: `ddx analyze` names the culprit.
void analyze_traces(const validate::ValidateOptions& o, validate::StageResult& r) {
  const std::string traces = o.out_dir + "/traces";
  if (!std::filesystem::exists(traces)) return;
  parity::run_process({parity::self_executable(), "analyze", traces}, {}, o.out_dir + "/analyze.log", 120);
  // The analyzer's one verdict line ("VERDICT: never-joined: rank 1 ...") becomes the summary.
  std::ifstream log(o.out_dir + "/analyze.log");
  for (std::string line; std::getline(log, line);) {
    if (line.rfind("VERDICT: ", 0) == 0) {
      r.summary = line;
      break;
    }
  }
  r.artefacts.push_back("analyze.log");
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

int run_validate(const validate::ValidateOptions& o) {
  if (const std::string rank = launched_rank(current_env()); !rank.empty()) {
    throw UsageError("ddx validate was started as " + rank +
                     ", but it launches every stage's ranks itself: run it once, outside the launcher (ddx validate "
                     "--np N, or --launcher \"srun\" / \"mpiexec -n N\" from one process)");
  }
  const size_t max_bytes = bw::parse_bytes("--max-bytes", o.max_bytes);  // bad input stops before any stage
  if (!o.expect.empty()) {  // so does a bad --expect, or one the sweep cannot judge
    const validate::Expectation e = validate::parse_expect(o.expect);
    const std::string small = validate::too_small_for(e, static_cast<double>(max_bytes));
    if (!small.empty()) throw UsageError(small);
  }
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
    const auto outcome = parity::run_process(stage.argv, stage.env, o.out_dir + "/" + r.log, o.stage_timeout_s);
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
    if (stage.name == "burn-in" && !r.passed) analyze_traces(o, r);
    std::printf(" %s (%.1f s)  %s\n", r.passed ? "PASS" : "FAIL", r.seconds, r.summary.c_str());
    if (!r.passed) std::printf("      log: %s/%s\n", o.out_dir.c_str(), r.log.c_str());
    std::fflush(stdout);
    failed = failed || !r.passed;
    results.push_back(r);
  }
  validate::write_report(o, results);
  std::printf("validate: %s; report %s/validate.html (also validate.json, validate.md)\n", failed ? "FAIL" : "PASS",
              o.out_dir.c_str());
  return failed ? 1 : 0;
}

}  // namespace

Subcommand add_validate_command(CLI::App& app) {
  auto o = std::make_shared<validate::ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Cluster acceptance: doctor, selfcheck, bandwidth sweep of every collective against the "
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
