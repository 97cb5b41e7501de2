// `ddx health fleet PATH...`: many nodes' `ddx health --json` reports (files, or folders where
// every node's lands) judged together: the newest report per host, each node's figures against
// its peers of the same device model (or a saved baseline), the nodes to drain and why. The
// console ends with one verdict line; the exit code is the fleet's worst state in Nagios terms.
// The work is in fleet.h; this file is the command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "ddx/text/text.h"
#include "health/baseline.h"
#include "health/fleet.h"
#include "health/health_command.h"

namespace ddx::cli {
namespace {

struct FleetFlags {
  std::vector<std::string> paths;
  std::string baseline, save_baseline, drain_list, markdown, html, json;
};

// What a run without a single readable report says: ddx could not check the fleet (UNKNOWN).
int nothing_readable(const health::FleetInput& input, const std::vector<std::string>& paths) {
  std::string why = "no .json file in " + join(paths);
  if (!input.unreadable.empty()) {
    why = input.unreadable.front().path + ": " + input.unreadable.front().why;
    if (input.unreadable.size() > 1) why += printf_text(" (+%zu more)", input.unreadable.size() - 1);
  }
  std::printf("ddx health fleet: UNKNOWN: no report could be read: %s\n", why.c_str());
  return static_cast<int>(health::State::Unknown);
}

int run_fleet(const FleetFlags& flags) {
  // Every output is checked before anything is read, and a bad baseline stops it too.
  check_output_file("--save-baseline", flags.save_baseline);
  check_output_file("--drain-list", flags.drain_list);
  check_output_file("--markdown", flags.markdown);
  check_output_file("--html", flags.html);
  check_output_file("--json", flags.json);
  std::unique_ptr<health::Baseline> baseline;
  if (!flags.baseline.empty()) baseline = std::make_unique<health::Baseline>(health::read_baseline_file(flags.baseline));

  const health::FleetInput input = health::read_fleet(flags.paths);
  if (input.reports.empty()) return nothing_readable(input, flags.paths);
  const health::FleetView view = health::judge_fleet(input, baseline.get(), flags.baseline);

  // Written even when empty: an empty list says that nothing is to be drained now. Written
  // before anything can stop the run, so that no earlier run's list is left to be acted on.
  if (!flags.drain_list.empty()) write_file_atomically(flags.drain_list, health::fleet_drain_list(view));
  if (!flags.markdown.empty()) write_file_atomically(flags.markdown, health::fleet_markdown(view));
  if (!flags.html.empty()) write_file_atomically(flags.html, health::fleet_html(view));
  if (!flags.json.empty()) write_file_atomically(flags.json, health::fleet_to_json(view).dump(2) + "\n");

  bool baseline_refused = false;
  if (!flags.save_baseline.empty()) {
    // A fleet's baseline counts each node once (its newest run). Reports of one node only are
    // that node's history: its own baseline is built from all its runs.
    const bool own = input.reports.size() == 1 && input.every_report.size() > 1;
    const std::vector<health::Report>& from = own ? input.every_report : input.reports;
    const health::Baseline built = health::build_baseline(from);
    if (built.models.empty()) {
      // An empty baseline would judge nothing and look like a pass: none is written.
      baseline_refused = true;
    } else {
      write_file_atomically(flags.save_baseline, health::baseline_to_json(built).dump(2) + "\n");
      if (own) {
        std::printf("baseline: %s's own %zu runs, written to %s\n", input.reports.front().host.c_str(), from.size(),
                    flags.save_baseline.c_str());
      } else {
        std::printf("baseline: the newest run of each of %zu nodes, written to %s\n", from.size(),
                    flags.save_baseline.c_str());
      }
    }
  }
  std::fputs(health::format_fleet_console(view).c_str(), stdout);
  if (baseline_refused) {
    std::printf("ddx health fleet: UNKNOWN: no baseline written to %s: none of the reports has a judged figure (level "
                "1 measures none, and a run on a busy node judges none: see its \"other load\" row)\n",
                flags.save_baseline.c_str());
    std::fflush(stdout);
    return static_cast<int>(health::State::Unknown);
  }
  std::fflush(stdout);
  return health::fleet_exit_code(view);
}

}  // namespace

Subcommand add_health_fleet_command(CLI::App& health) {
  auto flags = std::make_shared<FleetFlags>();
  CLI::App* cmd = health.add_subcommand(
      "fleet",
      "Many nodes' `ddx health --json` reports judged together: the newest per host, each node's figures against its "
      "peers of the same device model (median/MAD, as ddx's probes) or a saved baseline; names the low nodes with the "
      "figures, the CRITICAL ones with their drain reason and the unreadable files. Exit 0 OK, 1 WARN (low figures), "
      "2 a CRITICAL node, 3 UNKNOWN (a report that could not be read or could not check its node).");
  cmd->add_option("PATH", flags->paths, "Report files, or folders whose .json files (subfolders too) are reports")
      ->required();
  cmd->add_option("--baseline", flags->baseline,
                  "Judge each node against this saved baseline (from --save-baseline) instead of its peers");
  cmd->add_option("--save-baseline", flags->save_baseline,
                  "Write the baseline (median and MAD per device model and figure) to this file: from the newest run of each "
                  "node, or, when every report is of one node, from all its runs (the node's own baseline)");
  cmd->add_option("--drain-list", flags->drain_list,
                  "Write one line per node to drain, '<node> ddx: <reason>'; for SLURM: while read -r node reason; do "
                  "scontrol update nodename=\"$node\" state=drain reason=\"$reason\"; done < FILE");
  cmd->add_option("--markdown", flags->markdown, "Write a Markdown table, one row per node");
  cmd->add_option("--html", flags->html, "Write the same table as one self-contained HTML file");
  cmd->add_option("--json", flags->json, "Write every node's state, figures, low figures and reason as JSON");
  return {cmd, [flags]() {
            // Bad input goes to the front end (one line, exit 3 under `ddx health`); whatever else
            // escapes is ddx's own failure: one line and UNKNOWN, as `ddx health` does.
            try {
              return run_fleet(*flags);
            } catch (const UsageError&) {
              throw;
            } catch (const std::exception& e) {
              std::printf("ddx health fleet: UNKNOWN: ddx failed: %s\n", e.what());
              return static_cast<int>(health::State::Unknown);
            }
          }};
}

}  // namespace ddx::cli
