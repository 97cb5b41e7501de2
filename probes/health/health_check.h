#pragma once
// `ddx health`: the check an operator runs on every node, every day (the SLURM health check, the
// prolog and epilog, a timer on idle nodes). Every check of every level gives rows of this one
// shape; the report of a run is judged in one place (health_report.cpp), written for people (one
// verdict line, a table), for monitoring (Nagios exit codes, JSON, node_exporter's textfile) and
// for SLURM (a short drain reason). No LibTorch here: level 1 and the outputs never load kernels.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace ddx::health {

// The states of a Nagios plugin (and of Meta's GCM), which the exit code of `ddx health` is:
// 0 OK, 1 WARN, 2 CRITICAL, 3 UNKNOWN (ddx itself could not check; never drains a node).
enum class State { Ok = 0, Warn = 1, Critical = 2, Unknown = 3 };
const char* to_string(State state);  // "OK", "WARN", "CRITICAL", "UNKNOWN"

// One figure a check measured: a gauge in the Prometheus file and a column of the fleet view.
struct Metric {
  std::string name;                           // "ddx_health_gemm_tflops": Prometheus naming, unit last
  double value = 0;
  std::map<std::string, std::string> labels;  // {"device": "gpu0"}, {"dtype": "bf16"}, {"path": "/scratch"}
  // Whether the fleet view and a baseline judge it (higher is better: rates and bandwidths).
  bool judged = false;
};

struct Check {
  std::string name;         // "shm", "gpu0 ecc", "gemm gpu0 bf16", "path /scratch": unique within a run
  State state = State::Ok;
  bool skipped = false;     // nothing to check on this node (no GPU, no path given): counts for nothing
  std::string value;        // what was measured, one line
  std::string remediation;  // what the operator does about it, one line; empty when OK
  std::string reason;       // the few words SLURM's drain reason gets ("gpu3 uncorrectable ECC"); empty when OK
  std::vector<Metric> metrics;
};

struct Report {
  std::string host;
  int level = 1;
  std::string device_model;  // the GPUs' NVML name, else the CPU's model name: the fleet groups by it
  std::string ddx_version;
  std::string started;       // UTC, ISO 8601
  double seconds = 0;        // wall time of the whole run
  std::vector<Check> checks;
};

// The worst state of the checks that ran: CRITICAL over UNKNOWN over WARN over OK. A run in which
// every check was skipped tested nothing: UNKNOWN.
State overall(const Report& report);
int exit_code(const Report& report);  // overall(), as the number

// "ddx health: CRITICAL on node-b (level 2, 12.3 s): gemm gpu3 bf16 wrong at (5,17): 31 not 32;
// 24 checks: 21 OK, 1 WARN, 1 CRITICAL, 1 skipped".
std::string verdict_line(const Report& report);

// "ddx: <reasons of the CRITICAL checks>", at most `max_chars` (a whole reason or "+N more"); the
// prefix is how --slurm-resume knows a drain is ddx's own.
inline constexpr const char* kDrainPrefix = "ddx: ";
std::string drain_reason(const Report& report, size_t max_chars = 120);

// One row per check: state, name, value, remediation (the doctor's table layout).
std::string format_table(const Report& report);

nlohmann::json to_json(const Report& report);
// The inverse, for the fleet view: throws std::runtime_error naming the missing or wrong key.
Report report_from_json(const nlohmann::json& json);

// node_exporter's textfile collector format: HELP and TYPE once per metric, a gauge per check
// state (ddx_health_check_state{check=...} 0..3), the overall state, the run's seconds and start
// time, and every Metric, all labelled host="...". Names and labels: docs/health.md.
std::string to_prometheus(const Report& report);

}  // namespace ddx::health
