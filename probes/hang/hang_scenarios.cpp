// The scenarios: what each rank does, and what the diagnosis must say about it.
#include "hang_scenarios.h"

#include <signal.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ddx/processes/atomic_file.h"
#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"

namespace ddx::probes {
namespace {

using analyze::FindingKind;

struct Named {
  HangScenario scenario;
  const char* name;
};
constexpr Named kNames[] = {
    {HangScenario::Healthy, "healthy"},
    {HangScenario::MissingCollective, "missing-collective"},
    {HangScenario::MismatchedOp, "mismatched-op"},
    {HangScenario::MismatchedSize, "mismatched-size"},
    {HangScenario::Straggler, "straggler"},
    {HangScenario::DeadRank, "dead-rank"},
    {HangScenario::P2PDeadlock, "p2p-deadlock"},
};

// Pairs (0,1), (2,3), ...: the lower rank sends first, the higher receives first.
void exchange(Group& g, int step, bool reverse, const at::TensorOptions& opts) {
  const int me = g.rank();
  const int partner = me % 2 == 0 ? me + 1 : me - 1;
  if (partner >= g.size()) return;
  CallSite site("step " + std::to_string(step) + " exchange");
  at::Tensor out = torch::full({256}, static_cast<float>(me), opts);
  at::Tensor in = torch::empty({256}, opts);
  bool send_first = me < partner;
  if (reverse) send_first = !send_first;
  if (send_first) {
    send(g, out, partner).wait();
    recv(g, in, partner).wait();
  } else {
    recv(g, in, partner).wait();
    send(g, out, partner).wait();
  }
}

// torchelastic's exit barrier, through the store: a rank that finished waits for the others
// instead of exiting (a rank that exits early looks dead to its peers).
void exit_barrier(World& world, std::chrono::milliseconds timeout) {
  c10d::Store& store = world.store();
  store.set("ddx/hang/done/" + std::to_string(world.rank()), std::vector<uint8_t>{'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < world.size(); ++r) keys.push_back("ddx/hang/done/" + std::to_string(r));
  store.wait(keys, timeout);
}

std::string fault_file(const std::string& dir) { return dir + "/ddx-probe-fault.json"; }

// The moment the fault is planted, so the probe can say how long the diagnosis took.
void note_fault(const HangJob& job, int rank) {
  if (job.trace_dir.empty()) return;
  write_file_atomically(fault_file(job.trace_dir),
                        "{\"rank\": " + std::to_string(rank) + ", \"scenario\": \"" + to_string(job.scenario) +
                            "\", \"unix_ms\": " + std::to_string(unix_now_ms()) + "}\n");
}

}  // namespace

int64_t planted_fault_unix_ms(const std::string& trace_dir) {
  std::FILE* f = std::fopen(fault_file(trace_dir).c_str(), "r");
  if (!f) return 0;
  char buffer[256] = {};
  const size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
  std::fclose(f);
  const std::string text(buffer, n);
  const size_t at = text.find("\"unix_ms\": ");
  return at == std::string::npos ? 0 : std::atoll(text.c_str() + at + 11);
}

const std::vector<std::string>& hang_scenario_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Named& n : kNames) v.push_back(n.name);
    return v;
  }();
  return names;
}

HangScenario parse_hang_scenario(const std::string& name) {
  for (const Named& n : kNames) {
    if (name == n.name) return n.scenario;
  }
  std::string all;
  for (const Named& n : kNames) all += std::string(all.empty() ? "" : ", ") + n.name;
  throw UsageError("--scenario '" + name + "' is not one of " + all);
}

const char* to_string(HangScenario scenario) {
  for (const Named& n : kNames) {
    if (n.scenario == scenario) return n.name;
  }
  return "unknown";
}

ExpectedVerdict expected_verdict(const HangJob& job) {
  ExpectedVerdict e;
  e.culprit = job.culprit;
  switch (job.scenario) {
    case HangScenario::Healthy:
      e.culprit = -1;
      break;
    case HangScenario::MissingCollective:
      e.kinds = {FindingKind::SkippedCollective, FindingKind::NeverJoined};
      e.ops = {"all_reduce"};
      break;
    case HangScenario::MismatchedOp:
      e.kinds = {FindingKind::OpMismatch};
      e.ops = {"all_gather"};
      break;
    case HangScenario::MismatchedSize:
      e.kinds = {FindingKind::SizeMismatch};
      e.ops = {"all_reduce"};
      break;
    case HangScenario::Straggler:
      e.kinds = {FindingKind::NeverJoined};
      e.ops = {"all_reduce"};
      break;
    case HangScenario::DeadRank:
      e.kinds = {FindingKind::DeadRank};
      e.ops = {"all_reduce"};
      break;
    case HangScenario::P2PDeadlock:
      e.kinds = {FindingKind::P2PDeadlock};
      e.ops = {"send", "recv"};
      break;
  }
  return e;
}

std::string check_verdict(const HangJob& job, const analyze::Diagnosis& dx) {
  const ExpectedVerdict e = expected_verdict(job);
  if (e.kinds.empty()) {
    if (dx.findings.empty()) return "";
    return std::string("expected no problem, but the verdict is ") + analyze::to_string(dx.findings[0].kind);
  }
  if (dx.findings.empty()) return "expected a problem, but none was found";
  const analyze::Finding& f = dx.findings.front();
  std::string kinds;
  for (auto k : e.kinds) kinds += std::string(kinds.empty() ? "" : " or ") + analyze::to_string(k);
  if (std::find(e.kinds.begin(), e.kinds.end(), f.kind) == e.kinds.end()) {
    return "expected " + kinds + ", the verdict is " + analyze::to_string(f.kind);
  }
  if (f.culprits != std::vector<int>{e.culprit}) {
    return "expected culprit rank " + std::to_string(e.culprit) + ", the verdict names " +
           analyze::detail::rank_list(f.culprits);
  }
  if (std::find(e.ops.begin(), e.ops.end(), f.op) == e.ops.end()) {
    return "expected the op " + e.ops.front() + ", the verdict names '" + f.op + "'";
  }
  return "";
}

void run_hang_job(World& world, HangDetection& hangs, const HangJob& job) {
  Group& g = world.world();
  const bool culprit = world.rank() == job.culprit;
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(job.device == "cuda" ? at::kCUDA : at::kCPU);
  at::Tensor grads = torch::ones({job.numel}, opts);
  for (int step = 1; step <= job.steps; ++step) {
    const bool bad = culprit && step == job.bad_step;
    if (bad && job.scenario != HangScenario::Healthy) note_fault(job, world.rank());
    if (job.scenario == HangScenario::P2PDeadlock) exchange(g, step, bad, opts);
    CallSite site("step " + std::to_string(step) + " grads");
    if (bad) {
      switch (job.scenario) {
        case HangScenario::MissingCollective:
          log::info("probe hang: rank ", world.rank(), " skips the all_reduce of step ", step);
          continue;
        case HangScenario::MismatchedOp: {
          log::info("probe hang: rank ", world.rank(), " all-gathers at step ", step);
          at::Tensor out = torch::empty({job.numel * g.size()}, opts);
          all_gather(g, out, grads).wait();
          continue;
        }
        case HangScenario::MismatchedSize: {
          log::info("probe hang: rank ", world.rank(), " all-reduces ", job.numel - 24, " elements at step ", step);
          at::Tensor smaller = torch::ones({job.numel - 24}, opts);
          all_reduce(g, smaller).wait();
          continue;
        }
        case HangScenario::Straggler:
          log::info("probe hang: rank ", world.rank(), " sleeps ", 4 * job.timeout.count(), " ms before step ", step);
          std::this_thread::sleep_for(4 * job.timeout + std::chrono::seconds(10));
          break;
        case HangScenario::DeadRank: {
          log::info("probe hang: rank ", world.rank(), " dies in the all_reduce of step ", step);
          Work w = all_reduce(g, grads);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          ::raise(SIGKILL);  // like the OOM killer: no dump, no error file
          break;
        }
        default:
          break;
      }
    }
    all_reduce(g, grads).wait();
  }
  if (job.scenario == HangScenario::Healthy) {
    // The on-demand path: SIGUSR2 dumps while the job goes on.
    ::raise(SIGUSR2);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    const HangOptions& options = hangs.watchdog().options();
    const std::string path = flight_recorder_path(options.trace_dir, world.rank(), options.dump_format);
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::FILE* f = std::fopen(path.c_str(), "r")) {
        std::fclose(f);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  exit_barrier(world, 4 * job.timeout + std::chrono::seconds(30));
}

}  // namespace ddx::probes
