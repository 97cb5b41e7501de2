#pragma once
// The fleet view of `ddx health` (`ddx health fleet`, docs/health.md) without its command line:
// many nodes' reports read from files and folders (the newest per host), each node judged against
// its peers of the same device model or against a saved baseline (baseline.h), and what the view
// writes: a console summary, a drain list, a Markdown or HTML table, JSON. No LibTorch.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "health/baseline.h"
#include "health/health_check.h"

namespace ddx::health {

// Fewer nodes of one model than this (having a figure) are not judged against each other: with
// two, nothing tells the slow one from an unusually fast one.
constexpr int kMinFleetPeers = 3;

// A file given (or found in a folder given) that is not a readable report: listed as UNKNOWN.
struct UnreadableFile {
  std::string path;
  std::string why;
};

struct FleetInput {
  std::vector<Report> reports;             // the newest per host, by host
  std::vector<Report> every_report;        // every readable report, a host's earlier runs too
  std::vector<std::string> files;          // where each of `reports` was read
  std::vector<UnreadableFile> unreadable;  // in the order met
  int older = 0;                           // reports left out for a newer one of the same host
  int not_reports = 0;                     // ddx health baselines and fleet summaries met in folders
};

// Reads every path: a file, or a folder and its subfolders, whose *.json files are read with
// report_from_json. A path or file that cannot be read is an UnreadableFile, never an exception.
FleetInput read_fleet(const std::vector<std::string>& paths);

struct FleetNode {
  std::string name;                     // the host; for an unreadable file, its path
  std::string file;
  bool readable = false;
  Report report;                        // when readable
  State own = State::Unknown;           // the report's own overall state
  State state = State::Unknown;         // the fleet's: its own, and WARN for a low figure
  std::vector<FigureJudgement> low;     // its figures found low
  std::string reason;                   // why it is not OK, one line ("ddx: ..." when it is drained)
  bool drain = false;                   // CRITICAL, or low figures in a report that could judge itself
};

struct FleetView {
  std::vector<FleetNode> nodes;         // by name
  std::string judged_against;           // "their peers of the same device model" or "the baseline <file>"
  std::string reference;                // whose median a figure is held to: "its peers'", "the baseline's"
  std::vector<std::string> notes;       // what could not be judged and why, one line each
  int files_older = 0;
  int files_not_reports = 0;
};

// Judges every node: against `baseline` when given (its file named in `baseline_name`), else
// against its peers of the same device model by low_outliers, each figure with rule_for().
FleetView judge_fleet(const FleetInput& input, const Baseline* baseline, const std::string& baseline_name = "");

// The fleet's worst state (CRITICAL over UNKNOWN over WARN over OK, like overall()) and its
// Nagios exit code.
State fleet_state(const FleetView& view);
int fleet_exit_code(const FleetView& view);

// "ddx health fleet: WARN: 6 nodes: 5 OK, 1 WARN, 0 CRITICAL, 0 UNKNOWN; drain node-c".
std::string fleet_verdict_line(const FleetView& view);
// What the console shows: a short summary, one line per named node, notes, the verdict line last.
std::string format_fleet_console(const FleetView& view);
// One line per node to drain, "<node> <reason>", the reason starting with kDrainPrefix, for
// `while read -r node reason; do scontrol update ...; done` (docs/health.md).
std::string fleet_drain_list(const FleetView& view);
// One row per node: state, device model, every judged figure (low ones marked), the reason.
std::string fleet_markdown(const FleetView& view);
std::string fleet_html(const FleetView& view);  // self-contained: inline style, no script, no network
nlohmann::json fleet_to_json(const FleetView& view);

}  // namespace ddx::health
