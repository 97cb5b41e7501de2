// `ddx health --slurm-drain / --slurm-resume` (slurm_actions.h): scontrol from PATH, run through
// ddx's process runner with a timeout (a hung slurmctld must not outlast SLURM's 60 s limit on a
// HealthCheckProgram). The node's state and reason are read first, so that a drain an operator
// made is never overwritten and never resumed.
#include "health/slurm_actions.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "ddx/processes/run_process.h"

namespace ddx::health {
namespace {

constexpr double kScontrolTimeoutS = 15;

struct ScontrolResult {
  bool ok = false;
  std::string output;  // stdout and stderr
  std::string failure; // why it did not succeed, one line
};

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string quoted_argv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + (a.find(' ') == std::string::npos ? a : "\"" + a + "\"");
  return out;
}

ScontrolResult scontrol(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"scontrol"};
  argv.insert(argv.end(), args.begin(), args.end());
  const char* tmp = std::getenv("TMPDIR");
  std::string log = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddx-scontrol-XXXXXX";
  const int fd = ::mkstemp(log.data());
  ScontrolResult result;
  if (fd < 0) {
    result.failure = "cannot create a temporary file for scontrol's output in " + log.substr(0, log.rfind('/'));
    return result;
  }
  ::close(fd);
  ProcessOutcome outcome;
  try {
    outcome = run_process(argv, {}, log, kScontrolTimeoutS);
  } catch (const std::exception& e) {
    ::unlink(log.c_str());
    result.failure = quoted_argv(argv) + ": " + e.what();
    return result;
  }
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(log.c_str());
  result.output = text.str();
  if (outcome.timed_out) {
    result.failure = quoted_argv(argv) + " did not answer within " + std::to_string(static_cast<int>(kScontrolTimeoutS)) + " s";
  } else if (outcome.exit_code == 127 && result.output.find("cannot run scontrol") != std::string::npos) {
    result.failure = "scontrol is not on PATH (" + last_line(result.output) + ")";
  } else if (outcome.exit_code != 0) {
    result.failure = quoted_argv(argv) + " failed (exit " + std::to_string(outcome.exit_code) + "): " + last_line(result.output);
  } else {
    result.ok = true;
  }
  return result;
}

struct NodeState {
  std::string state;   // "IDLE+DRAIN", "MIXED", "DOWN+DRAIN"
  std::string reason;  // without the " [user@time]" SLURM appends
  bool out_of_service() const {
    return state.find("DRAIN") != std::string::npos || state.find("DOWN") != std::string::npos ||
           state.find("FAIL") != std::string::npos;
  }
  bool ddx_reason() const { return reason.rfind(kDrainPrefix, 0) == 0; }
};

// `scontrol show node NAME -o` is one line of Key=value fields; Reason's value has spaces and is
// followed by " [user@time]".
NodeState parse_node_line(const std::string& line) {
  NodeState node;
  static const std::regex state_re(R"((?:^|\s)State=(\S+))");
  std::smatch m;
  if (std::regex_search(line, m, state_re)) node.state = m[1];
  const size_t at = line.find(" Reason=") != std::string::npos ? line.find(" Reason=") + 1
                    : line.rfind("Reason=", 0) == 0                ? 0
                                                                   : std::string::npos;
  if (at == std::string::npos) return node;
  std::string rest = line.substr(at + 7);
  static const std::regex stamp_re(R"( \[[^\]\s]*@[^\]\s]*\])");
  static const std::regex next_field_re(R"( [A-Z][A-Za-z]*=)");
  if (std::regex_search(rest, m, stamp_re)) {
    rest = rest.substr(0, m.position(0));
  } else if (std::regex_search(rest, m, next_field_re)) {
    rest = rest.substr(0, m.position(0));
  }
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.pop_back();
  node.reason = rest == "(null)" || rest == "none" ? "" : rest;
  return node;
}

bool read_node(const std::string& node, NodeState& out, std::string& failure) {
  const ScontrolResult r = scontrol({"show", "node", node, "-o"});
  if (!r.ok) {
    failure = r.failure;
    return false;
  }
  out = parse_node_line(r.output);
  if (out.state.empty()) {
    failure = "scontrol show node " + node + " -o gave no State=: " + last_line(r.output);
    return false;
  }
  return true;
}

SlurmAction failed(const std::string& what) { return {false, "slurm: " + what, true}; }

}  // namespace

std::string slurm_node_name() {
  if (const char* name = std::getenv("SLURMD_NODENAME"); name && *name) return name;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  std::string name = host;
  return name.substr(0, name.find('.'));
}

SlurmAction drain_if_critical(const Report& report, const std::string& node) {
  const State state = overall(report);
  if (state != State::Critical) {
    return {false, std::string("slurm: ") + node + " not drained (" + to_string(state) +
                       (state == State::Unknown ? ": ddx could not check, which never drains" : "") + ")"};
  }
  const std::string reason = drain_reason(report);
  NodeState current;
  std::string why;
  if (!read_node(node, current, why)) return failed("cannot drain " + node + ": " + why);
  if (current.out_of_service() && !current.reason.empty() && !current.ddx_reason()) {
    return {false, "slurm: " + node + " left as it is (" + current.state + ", reason \"" + current.reason +
                       "\" is not ddx's); ddx would drain it for \"" + reason + "\""};
  }
  if (current.state.find("DRAIN") != std::string::npos && current.reason == reason) {
    return {false, "slurm: " + node + " already drained: " + reason};
  }
  const ScontrolResult r = scontrol({"update", "nodename=" + node, "state=drain", "reason=" + reason});
  if (!r.ok) return failed("cannot drain " + node + ": " + r.failure);
  return {true, "slurm: drained " + node + ": " + reason};
}

SlurmAction resume_if_ours(const Report& report, const std::string& node) {
  const State state = overall(report);
  if (state != State::Ok && state != State::Warn) {
    return {false, std::string("slurm: ") + node + " not resumed (" + to_string(state) + ")"};
  }
  NodeState current;
  std::string why;
  if (!read_node(node, current, why)) return failed("cannot resume " + node + ": " + why);
  if (!current.out_of_service()) return {false, "slurm: " + node + " is in service (" + current.state + ")"};
  if (!current.ddx_reason()) {
    return {false, "slurm: " + node + " stays " + current.state + ": reason \"" + current.reason + "\" is not ddx's"};
  }
  const ScontrolResult r = scontrol({"update", "nodename=" + node, "state=resume"});
  if (!r.ok) return failed("cannot resume " + node + ": " + r.failure);
  return {true, "slurm: resumed " + node + " (was " + current.state + ": " + current.reason + ")"};
}

}  // namespace ddx::health
