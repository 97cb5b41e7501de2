// `ddx analyze <trace-dir>`: reads every rank's flight recorder dump and names the culprit.
// Exit status: 0 no problem found, 1 a problem was found, 2 bad input.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/report.h"
#include "cli/commands.h"

namespace ddx::cli {

Subcommand add_analyze_command(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string prefix;
    bool json = false;
    int world_size = 0;
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
  return {cmd, [flags]() {
            analyze::TraceSet traces = analyze::load_traces(flags->inputs, flags->prefix, flags->world_size);
            // Each file that could not be used: one line on stderr, and the analysis goes on.
            for (const analyze::DumpProblem& p : traces.problems) {
              if (p.kind != "missing") std::fprintf(stderr, "ddx analyze: warning: %s\n", p.detail.c_str());
            }
            analyze::Diagnosis dx = analyze::diagnose(traces);
            const std::string text = flags->json ? analyze::render_json(traces, dx) : analyze::render_text(traces, dx);
            std::fwrite(text.data(), 1, text.size(), stdout);
            return dx.findings.empty() ? 0 : 1;
          }};
}

}  // namespace ddx::cli
