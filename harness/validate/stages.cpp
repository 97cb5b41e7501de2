// The stages of `ddx validate`: the existing commands with the flags acceptance needs.
#include <numeric>

#include "ddx/text/text.h"
#include "harness/validate/validate.h"

namespace ddx::validate {
namespace {

std::vector<std::string> launch_prefix(const ValidateOptions& o, const std::string& ddx) {
  if (o.launcher.empty()) return {ddx, "launch", "-np", std::to_string(o.nproc), "--"};
  return split_words(o.launcher);
}

}  // namespace

std::vector<Stage> plan_stages(const ValidateOptions& o, const std::string& ddx) {
  const std::vector<std::string> prefix = launch_prefix(o, ddx);
  auto under_launcher = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = prefix;
    argv.push_back(ddx);
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  const std::string& out = o.out_dir;
  std::vector<Stage> stages;
  stages.push_back({"doctor", under_launcher({"doctor", "--json", out + "/doctor.json"}), {"doctor.json"}, "doctor: "});
  // NVML on every GPU (each rank its own): ECC, remapping, throttling, PCIe, NVLink, XIDs;
  // SKIP (a PASS) on a machine without a driver.
  stages.push_back({"gpu health", under_launcher({"probe", "gpu-health", "--json", out + "/gpu-health.json"}),
                    {"gpu-health.json"}, "gpu-health: "});
  stages.push_back({"selfcheck", under_launcher({"probe", "selfcheck", "--json", out + "/selfcheck.json"}),
                    {"selfcheck.json"}, "selfcheck: "});
  // Every rank's matmul and memory bandwidth at once: the rank or host far below its peers is
  // named (probes/node/), before the collectives that such a rank would slow down.
  stages.push_back({"compute", under_launcher({"probe", "compute", "--json", out + "/compute.json"}), {"compute.json"},
                    "compute: "});
  stages.push_back({"memory", under_launcher({"probe", "memory", "--json", out + "/memory.json"}), {"memory.json"},
                    "memory: "});
  // The busbw floor is judged by validate itself at the largest size (link_types.h).
  stages.push_back({"bandwidth",
                    under_launcher({"probe", "bandwidth", "--op-list", "all", "-b", "1K", "-e", o.max_bytes, "-f", "4",
                                    "-n", "5", "-w", "2", "--json", out + "/bandwidth.json", "--plot",
                                    out + "/busbw.svg"}),
                    {"bandwidth.json", "busbw.svg"}, "# ddx probe bandwidth: "});
  stages.push_back({"pairwise links",
                    under_launcher({"probe", "bandwidth", "--pairs", "-e", o.max_bytes, "-n", "5", "-w", "2",
                                    "--json", out + "/pairs.json"}),
                    {"pairs.json"}, "# ddx probe bandwidth --pairs: "});
  // ddx parity starts its own runs at the given world size (under the same launcher), on a
  // global batch that every data-parallel variant splits at that size (8 sequences at 2 and 4
  // ranks, 24 at 3).
  const int global_batch = std::lcm(8, 2 * o.nproc);
  std::vector<std::string> parity = {ddx, "parity", "--world-sizes", std::to_string(o.nproc), "--steps",
                                     std::to_string(o.parity_steps), "--global-batch", std::to_string(global_batch),
                                     "--no-determinism", "--out", out + "/parity"};
  if (!o.launcher.empty()) parity.insert(parity.end(), {"--launcher", o.launcher});
  stages.push_back({"parity", parity, {"parity/report.json", "parity/loss.svg"}, "parity: "});
  // A short DDP run of the debug model; a hang or a failed collective dumps every rank's
  // flight recorder into <out>/traces, which validate then hands to `ddx analyze`, within the
  // 60 s collective timeout (well inside the stage timeout).
  Stage burn_in{"burn-in",
                under_launcher({"train", "--strategy", "ddp", "-m", "debug", "-s", "32", "-b", "4", "--max-steps",
                                std::to_string(o.burn_in_steps), "--log-freq", "1", "--no-progress", "--save-dir",
                                out + "/burn-in", "--metrics-file", out + "/burn-in/metrics.jsonl", "--plot-file",
                                out + "/burn-in/loss.svg"}),
                {"burn-in/metrics.jsonl", "burn-in/loss.svg"},
                "done: final loss "};
  burn_in.env = {{"DDX_TRACE_DIR", out + "/traces"}, {"DDX_COLLECTIVE_TIMEOUT", "60s"}};
  stages.push_back(burn_in);
  return stages;
}

}  // namespace ddx::validate
