// The stages of `ddx validate`: the existing commands with the flags acceptance needs.
#include <sstream>

#include "validate/validate.h"

namespace ddx::validate {
namespace {

std::vector<std::string> launch_prefix(const ValidateOptions& o, const std::string& ddx) {
  if (o.launcher.empty()) return {ddx, "launch", "-np", std::to_string(o.nproc), "--"};
  std::vector<std::string> prefix;
  std::istringstream words(o.launcher);
  for (std::string w; words >> w;) prefix.push_back(w);
  return prefix;
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
  stages.push_back({"selfcheck", under_launcher({"probe", "selfcheck", "--json", out + "/selfcheck.json"}),
                    {"selfcheck.json"}, "selfcheck: "});
  std::vector<std::string> bw = {"probe", "bandwidth", "--op-list", "all", "-b", "1K", "-e", o.max_bytes, "-f", "4",
                                 "-n", "5", "-w", "2", "--json", out + "/bandwidth.json", "--plot", out + "/busbw.svg"};
  if (o.min_busbw > 0) {
    bw.push_back("--min-busbw");
    bw.push_back(std::to_string(o.min_busbw));
  }
  stages.push_back({"bandwidth", under_launcher(bw), {"bandwidth.json", "busbw.svg"}, "# ddx probe bandwidth: "});
  stages.push_back({"pairwise links",
                    under_launcher({"probe", "bandwidth", "--pairs", "-e", o.max_bytes, "-n", "5", "-w", "2",
                                    "--json", out + "/pairs.json"}),
                    {"pairs.json"}, "# ddx probe bandwidth --pairs: "});
  // ddx parity starts its own runs (ddx launch) at the given world size.
  stages.push_back({"parity",
                    {ddx, "parity", "--world-sizes", std::to_string(o.nproc), "--steps", std::to_string(o.parity_steps),
                     "--no-determinism", "--out", out + "/parity"},
                    {"parity/report.json", "parity/loss.svg"}, "parity: "});
  return stages;
}

}  // namespace ddx::validate
