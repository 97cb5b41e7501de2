// `ddx analyze <trace-dir>`: reads every rank's flight recorder dump and names the culprit.
// Exit status: 0 no problem found, 1 a problem was found, 2 bad input.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyze_command.h"
#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/entry_listing.h"
#include "analyzer/report.h"
#include "analyzer/timeline.h"
#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"

namespace ddx::cli {

Subcommand add_analyze_command(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string prefix;
    bool json = false;
    int world_size = 0;
    std::string trace;
    bool just_print_entries = false;
    std::vector<int> selected_ranks;
    std::vector<std::string> pg_filters;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Analyze the flight recorder dumps of a hung or failed job, ddx's own (ddx-fr-rank<R>.json) or a PyTorch "
      "job's (nccl_trace_rank_<R>, pickle or JSON; docs/analyze-pytorch.md): align collectives across ranks "
      "and name the culprit rank, host, collective and call site. "
      "Exit 0: no problem found; 1: a problem was found; 2: bad input.");
  cmd->add_option("traces", flags->inputs,
                  "A directory of dumps, or dump files; each file's format is detected from its content")
      ->required();
  cmd->add_option("-p,--prefix", flags->prefix,
                  "Read only the files named <prefix><rank> (as torchfrtrace -p: nccl_trace_rank_)");
  cmd->add_flag("--json", flags->json, "Print the diagnosis as JSON");
  cmd->add_option("--world-size", flags->world_size,
                  "Number of ranks in the job, when no dump says so (every dump missing but a few)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--trace", flags->trace,
                  "Also write every rank's ops as a Chrome/Perfetto trace to this file (open in ui.perfetto.dev), "
                  "and the same as a picture beside it (<file without .json>.svg)");
  // torchfrtrace's flags, by the same names (docs/analyze-pytorch.md puts them side by side).
  CLI::Option* just = cmd->add_flag("-j,--just-print-entries,--just_print_entries", flags->just_print_entries,
                                    "Print each rank's recorded ops as a table instead of analysing them");
  cmd->add_option("--selected-ranks", flags->selected_ranks, "With -j: only these ranks")
      ->check(CLI::NonNegativeNumber)
      ->needs(just);
  cmd->add_option("--pg-filters", flags->pg_filters,
                  "With -j: only these process groups, by name or description (0, default_pg, tp/1)")
      ->needs(just);
  return {cmd, [flags]() {
            check_output_file("--trace", flags->trace);  // before the dumps are read, like every output path
            // Left to the process's exit to free: at a thousand dumps, freeing two million
            // entries one by one takes longer than analysing them.
            const analyze::TraceSet& traces =
                *new analyze::TraceSet(analyze::load_traces(flags->inputs, flags->prefix, flags->world_size));
            // Each file that could not be used: one line on stderr, and the analysis goes on.
            for (const analyze::DumpProblem& p : traces.problems) {
              if (p.kind != "missing") std::fprintf(stderr, "ddx analyze: warning: %s\n", p.detail.c_str());
            }
            if (flags->just_print_entries) {
              const std::set<int> ranks(flags->selected_ranks.begin(), flags->selected_ranks.end());
              const std::string text = analyze::render_entries(traces, ranks, flags->pg_filters);
              std::fwrite(text.data(), 1, text.size(), stdout);
              return 0;
            }
            analyze::Diagnosis dx = analyze::diagnose(traces);
            if (!flags->trace.empty()) {
              const analyze::Timeline timeline = analyze::build_timeline(traces, dx);
              std::string svg = flags->trace;
              if (svg.size() > 5 && svg.compare(svg.size() - 5, 5, ".json") == 0) svg.resize(svg.size() - 5);
              svg += ".svg";
              try {
                write_file_atomically(flags->trace, analyze::render_chrome_trace(timeline));
                write_file_atomically(svg, analyze::render_timeline_svg(timeline));
              } catch (const std::exception& e) {
                throw UsageError(std::string("--trace: ") + e.what());
              }
              std::fprintf(stderr, "ddx analyze: wrote %s (open it in ui.perfetto.dev or chrome://tracing) and %s\n",
                           flags->trace.c_str(), svg.c_str());
            }
            const std::string text = flags->json ? analyze::render_json(traces, dx) : analyze::render_text(traces, dx);
            std::fwrite(text.data(), 1, text.size(), stdout);
            return dx.findings.empty() ? 0 : 1;
          }};
}

}  // namespace ddx::cli
