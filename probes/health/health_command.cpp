// `ddx health`: this node's check (docs/health.md). Level 1 is passive (level1.h), levels 2 and 3
// add the active checks (active_checks.h) and, with --baseline, the figures against a baseline
// (baseline.h). Prints the table, any SLURM action, and the verdict line last; exits with the
// Nagios state. Bad input exits 3 (UNKNOWN), not 2: 2 is CRITICAL to Nagios and to a SLURM prolog,
// and a mistyped flag must never drain a fleet. Whatever goes wrong inside ddx is UNKNOWN too.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>

#include "ddx/processes/atomic_file.h"
#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/errors/usage_exit_code.h"
#include "ddx/errors/verdict.h"
#include "ddx/version.h"
#include "health/active_checks.h"
#include "health/baseline.h"
#include "health/health_check.h"
#include "health/health_command.h"
#include "health/level1.h"
#include "health/other_load.h"
#include "health/slurm_actions.h"

namespace ddx::cli {
namespace {

using nlohmann::json;
using health::Check;
using health::Report;
using health::State;

constexpr int kExitUnknown = static_cast<int>(State::Unknown);

struct HealthFlags {
  int level = 1;
  std::vector<std::string> paths;
  int local_ranks = 0;
  std::string device = "auto";
  std::string json_path, prometheus_path, baseline_path;
  bool slurm_drain = false, slurm_resume = false;
  std::string node;
  bool node_given = false;
  double storage_mib = 256;
  double burn_in_s = 300;
};

std::string utc_now_iso() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

Check unknown_row(const std::string& name, const std::string& why, const std::string& remediation) {
  Check c;
  c.name = name;
  c.state = State::Unknown;
  c.value = why;
  c.remediation = remediation;
  return c;
}

// A check that throws is that check's UNKNOWN row: the run goes on and says what ddx could not
// look at, instead of stopping with the node's other faults unreported.
void add_checks(std::vector<Check>& rows, const std::string& what, const std::function<std::vector<Check>()>& run) {
  try {
    for (auto& c : run()) rows.push_back(std::move(c));
  } catch (const UsageError&) {
    throw;  // bad input (--device cuda without a GPU, a DDX_FAULT outside the product) is no finding
  } catch (const std::exception& e) {
    rows.push_back(unknown_row(what, std::string("ddx could not run it: ") + e.what(),
                               "report it with this line (ddx itself failed, not the node)"));
  }
}

// Everything that can be wrong with the command line, found before any check runs.
void check_flags(const HealthFlags& flags) {
  check_output_file("--json", flags.json_path);
  check_output_file("--prometheus", flags.prometheus_path);
  // The name the report, the fleet view and scontrol use: a SLURM node name has no spaces.
  if (flags.node_given && (flags.node.empty() || flags.node.find_first_of(" \t\n\"'") != std::string::npos)) {
    throw UsageError("--node '" + flags.node + "' is not a node name (one word, as sinfo -N lists it)");
  }
  for (const auto& p : flags.paths) {
    if (p.empty()) throw UsageError("--path: an empty path");
  }
}

Report run_checks(const HealthFlags& flags, const health::Baseline* baseline) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  report.host = flags.node.empty() ? health::slurm_node_name() : flags.node;
  report.level = flags.level;
  report.ddx_version = ddx_version();
  report.started = utc_now_iso();
  health::Level1Options level1;
  level1.paths = flags.paths;
  level1.local_ranks = flags.local_ranks;
  try {
    report.device_model = health::node_device_model(level1);
  } catch (const std::exception& e) {
    log::warn("ddx health: no device model: ", e.what());
  }
  add_checks(report.checks, "level 1", [&] { return health::level1_checks(level1, current_env()); });
  if (flags.level >= 2) {
    health::ActiveOptions active;
    active.level = flags.level;
    active.device = flags.device;
    active.paths = flags.paths;
    active.storage_mib = flags.storage_mib;
    active.burn_in_s = flags.burn_in_s;
    for (const Check& c : report.checks) {
      for (const health::Metric& m : c.metrics) {
        if (m.name == "ddx_health_gpus") active.nvml_gpus = static_cast<int>(m.value);
      }
    }
    const auto before = health::read_cpu_ticks();
    std::vector<Check> measured;
    add_checks(measured, "level " + std::to_string(flags.level), [&] { return health::active_checks(active); });
    const Check load = health::other_load_row(before, health::read_cpu_ticks(), measured);
    for (auto& c : measured) report.checks.push_back(std::move(c));
    report.checks.push_back(load);
  }
  if (baseline) {
    add_checks(report.checks, "baseline", [&] { return health::judge_against_baseline(report, *baseline); });
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

json action_json(const health::SlurmAction& a) { return {{"acted", a.acted}, {"failed", a.failed}, {"line", a.line}}; }

// --slurm-drain and --slurm-resume; an action that could not be done is an UNKNOWN row (a CRITICAL
// node stays CRITICAL: UNKNOWN ranks below it).
json slurm_actions(const HealthFlags& flags, Report& report, std::vector<std::string>& lines) {
  json out = json::object();
  if (!flags.slurm_drain && !flags.slurm_resume) return out;
  const std::string node = flags.node.empty() ? health::slurm_node_name() : flags.node;
  out["node"] = node;
  auto act = [&](const char* name, const health::SlurmAction& a) {
    lines.push_back(a.line);
    out[name] = action_json(a);
    if (a.failed) {
      report.checks.push_back(unknown_row(std::string("slurm ") + name, a.line,
                                          "check that scontrol works on this node (SLURM_CONF, slurmctld up, run as SlurmUser)"));
    }
  };
  if (flags.slurm_drain) act("drain", health::drain_if_critical(report, node));
  if (flags.slurm_resume) act("resume", health::resume_if_ours(report, node));
  return out;
}

// A file that cannot be written is an UNKNOWN row, after the other outputs were tried.
void write_output(Report& report, const std::string& flag, const std::string& path, const std::function<std::string()>& text) {
  if (path.empty()) return;
  try {
    write_file_atomically(path, text());
  } catch (const std::exception& e) {
    report.checks.push_back(unknown_row("write " + flag, e.what(), "give " + flag + " a path this user can write"));
  }
}

int run_health(const HealthFlags& flags) {
  std::unique_ptr<health::Baseline> baseline;
  Report report;
  try {
    check_flags(flags);
    if (!flags.baseline_path.empty()) baseline = std::make_unique<health::Baseline>(health::read_baseline_file(flags.baseline_path));
    // The active levels refuse what they cannot check as asked before they run a kernel; the
    // passive rows already read are dropped, unprinted, with nothing written.
    report = run_checks(flags, baseline.get());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ddx: error: %s\n", e.what());
    return kExitUnknown;
  }
  std::vector<std::string> slurm_lines;
  const json slurm = slurm_actions(flags, report, slurm_lines);
  write_output(report, "--prometheus", flags.prometheus_path, [&] { return health::to_prometheus(report); });
  write_output(report, "--json", flags.json_path, [&] {
    json j = health::to_json(report);
    if (!slurm.empty()) j["slurm"] = slurm;
    return j.dump(2) + "\n";
  });
  std::fputs(health::format_table(report).c_str(), stdout);
  for (const auto& line : slurm_lines) std::printf("%s\n", line.c_str());
  const std::string verdict = health::verdict_line(report);
  std::printf("%s\n", verdict.c_str());
  std::fflush(stdout);
  const int rc = health::exit_code(report);
  if (rc != 0) write_verdict_report(verdict, rc);
  return rc;
}

}  // namespace

Subcommand add_health_command(CLI::App& app) {
  auto flags = std::make_shared<HealthFlags>();
  CLI::App* cmd = app.add_subcommand(
      "health",
      "This node's health for SLURM and monitoring: level 1 passive (10 s: doctor facts, NVML, kernel log, --path "
      "space), level 2 active (60 s: known-answer GEMM, compute, memory, bandwidth, all-reduce, storage), level 3 "
      "(links, burn-in). One verdict line; exit 0 OK, 1 WARN, 2 CRITICAL, 3 UNKNOWN (also bad input). "
      "See docs/health.md.");
  set_usage_exit_code(*cmd, kExitUnknown);
  cmd->add_option("--level", flags->level, "1 passive, 2 active, 3 with links and burn-in")
      ->check(CLI::Range(1, 3))
      ->capture_default_str();
  cmd->add_option("--path", flags->paths, "A checkpoint or scratch folder: free space and inodes (full: CRITICAL); "
                                          "at level 2 a write-and-fsync test. Repeatable");
  cmd->add_option("--local-ranks", flags->local_ranks, "Ranks a job puts on this node (/dev/shm is judged for them); "
                                                       "0: one per GPU NVML sees, else 1")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--device", flags->device, "Levels 2-3: auto (every GPU, else the CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--json", flags->json_path, "Write the report as JSON (atomically)");
  cmd->add_option("--prometheus", flags->prometheus_path,
                  "Write node_exporter's textfile format (atomically; a .prom file in its --collector.textfile.directory)");
  cmd->add_option("--baseline", flags->baseline_path, "Judge the figures against this baseline (ddx health fleet --save-baseline)");
  cmd->add_flag("--slurm-drain", flags->slurm_drain, "On CRITICAL, drain this node with reason \"ddx: ...\" (scontrol)");
  cmd->add_flag("--slurm-resume", flags->slurm_resume, "On OK or WARN, resume this node if ddx drained it");
  cmd->add_option_function<std::string>(
      "--node",
      [flags](const std::string& name) {
        flags->node = name;
        flags->node_given = true;
      },
      "This node's name in the report and for scontrol (default: SLURMD_NODENAME, else the short hostname)");
  cmd->add_option("--storage-mib", flags->storage_mib, "Levels 2-3: MiB written and fsynced in each --path")
      ->check(CLI::Range(1.0, 1048576.0))
      ->capture_default_str();
  cmd->add_option("--burn-in", flags->burn_in_s, "Level 3: seconds of burn-in under load")
      ->check(CLI::Range(1.0, 604800.0))
      ->capture_default_str();
  return {cmd, [flags]() {
            // Whatever escapes is ddx's own failure: one line and UNKNOWN, never a stack trace
            // and an abort that a prolog could read as a failed node.
            try {
              return run_health(*flags);
            } catch (const std::exception& e) {
              std::fprintf(stdout, "ddx health: UNKNOWN: ddx failed: %s\n", e.what());
              return kExitUnknown;
            }
          }};
}

}  // namespace ddx::cli
