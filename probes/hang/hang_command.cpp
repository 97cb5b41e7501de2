// `ddx probe hang` on the command line. Without --worker: runs the scenario as a job under
// `ddx launch`, waits for the watchdog to end it, analyzes the dumps and checks that the
// diagnosis names the planted culprit and op. With --worker (what the launcher runs): one rank
// of that job.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/report.h"
#include "ddx/processes/env.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/watchdog/flight_recorder.h"
#include "ddx/text/log.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/processes/run_process.h"
#include "hang/hang_command.h"
#include "hang_scenarios.h"

namespace ddx::cli {
namespace {

struct HangFlags {
  std::string scenario = "missing-collective";
  int culprit = 1;
  int np = 2;
  bool np_marker = false;
  std::string backend = "gloo";
  std::string timeout = "5s";
  std::string trace_dir;
  bool check_collectives = false;
  bool quiet = false;
  bool worker = false;
};

std::string make_trace_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddx-hang-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw UsageError("cannot create a trace directory from " + pattern);
  return pattern;
}

// The environment the probe's hang detection reads: without the DDX_* variables its own flags
// and plan set (--timeout, --trace-dir, the watchdog's action and heartbeat), so a value there,
// well-formed or not, changes nothing; the rest (DDX_FR_FORMAT, DDX_FR_BUFFER_SIZE, ...) is read.
EnvMap probe_env() {
  EnvMap env = current_env();
  for (const char* set_by_the_probe : {"DDX_COLLECTIVE_TIMEOUT", "DDX_TRACE_DIR", "DDX_ON_TIMEOUT", "DDX_HEARTBEAT_TIMEOUT"}) {
    env.erase(set_by_the_probe);
  }
  return env;
}

probes::HangJob job_from(const HangFlags& f) {
  probes::HangJob job;
  job.scenario = probes::parse_hang_scenario(f.scenario);
  job.culprit = f.culprit;
  job.timeout = parse_duration("--timeout", f.timeout);
  job.device = f.backend == "nccl" ? "cuda" : "cpu";
  job.trace_dir = f.trace_dir;
  return job;
}

void validate(const HangFlags& f, const probes::HangJob& job) {
  if (f.np < 2) throw UsageError("-np " + std::to_string(f.np) + ": a hang needs at least 2 ranks");
  if (f.culprit < 0 || f.culprit >= f.np) {
    throw UsageError("--culprit-rank " + std::to_string(f.culprit) + " is outside 0.." + std::to_string(f.np - 1));
  }
  if (job.timeout.count() < 100) throw UsageError("--timeout " + f.timeout + " is below 100 ms");
  // Here, once, rather than in every rank, where a bad value reads as a cluster that did not dump.
  hang_options_from_env(probe_env());
  if (job.scenario == probes::HangScenario::P2PDeadlock && f.np % 2 != 0) {
    throw UsageError("--scenario p2p-deadlock pairs ranks (0,1), (2,3), ...: use an even -np, not " +
                     std::to_string(f.np));
  }
  if (f.backend == "nccl") {
    const int devices = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    if (devices < f.np) {
      throw UsageError("--backend nccl needs one CUDA device per rank: -np " + std::to_string(f.np) +
                       ", but this host has " + std::to_string(devices));
    }
  }
}

// One rank of the job.
int run_worker(const HangFlags& f) {
  probes::HangJob job = job_from(f);
  RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  ProcessGroupOptions pg;
  // The backend's own timeout is well past the watchdog's, so the watchdog is what notices
  // the hang (as with NCCL, whose ops never time out on the CPU side by themselves).
  pg.collective_timeout = 3 * job.timeout + std::chrono::seconds(10);
  pg.store_timeout = std::chrono::seconds(60);
  pg.enable_nccl = job.device == "cuda";
  auto world = World::init(info, pg);
  HangOptions ho = hang_options_from_env(probe_env());
  ho.trace_dir = f.trace_dir;
  ho.collective_timeout = job.timeout;
  ho.on_timeout = OnTimeout::Abort;
  ho.check_collectives = f.check_collectives;
  ho.heartbeat_interval = std::chrono::milliseconds(200);
  // Generous: a heartbeat thread starved for a moment on a loaded CI machine is not a dead rank.
  ho.heartbeat_timeout = std::max<std::chrono::milliseconds>(2 * job.timeout, std::chrono::seconds(5));
  auto hangs = HangDetection::install(*world, ho);
  probes::run_hang_job(*world, *hangs, job);
  log::info("probe hang: rank ", info.rank, " finished");
  hangs.reset();
  world->shutdown();
  return 0;
}

// Runs `argv` and waits up to `limit`; on overrun it is stopped (SIGTERM, then SIGKILL).
// Returns the wait status, or nullopt on overrun.
std::optional<int> run_and_wait(std::vector<std::string> argv, std::chrono::milliseconds limit) {
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::execv(c_argv[0], c_argv.data());
    std::perror("ddx probe hang: exec");
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGTERM);  // the launcher stops its workers, then exits
  for (int i = 0; i < 200 && ::waitpid(pid, &status, WNOHANG) != pid; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return std::nullopt;
}

int run_probe(const HangFlags& f) {
  probes::HangJob job = job_from(f);
  validate(f, job);
  const std::string dir = f.trace_dir.empty() ? make_trace_dir() : f.trace_dir;
  const std::string exe = self_executable();
  const bool healthy = job.scenario == probes::HangScenario::Healthy;
  std::printf("ddx probe hang: scenario %s%s, %d ranks, %s, collective timeout %s, trace dir %s\n",
              f.scenario.c_str(), healthy ? "" : (", culprit rank " + std::to_string(f.culprit)).c_str(), f.np,
              f.backend.c_str(), format_duration(job.timeout).c_str(), dir.c_str());
  std::vector<std::string> argv{exe, "launch", "-np", std::to_string(f.np), "--log-dir", dir + "/logs",
                                "--grace-period", "5"};
  if (!f.quiet) argv.push_back("--tee");
  for (const std::string& a : {std::string("--"), exe, std::string("probe"), std::string("hang"),
                               std::string("--worker"), std::string("--scenario"), f.scenario,
                               std::string("--culprit-rank"), std::to_string(f.culprit),
                               std::string("--backend"), f.backend, std::string("--timeout"), f.timeout,
                               std::string("--trace-dir"), dir}) {
    argv.push_back(a);
  }
  if (f.check_collectives) argv.push_back("--check-collectives");
  // Start-up, the timeout, the dumps and the launcher's grace period, with room to spare.
  const auto limit = 2 * job.timeout + std::chrono::seconds(60);
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<int> status = run_and_wait(argv, limit);
  const double job_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!status) {
    std::printf("ddx probe hang: FAIL: the job did not end within %s: the watchdog did not stop it\n",
                format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(limit)).c_str());
    return 1;
  }
  const int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  std::printf("\nddx probe hang: the job ended after %.1f s (launcher exit %d); analyzing %s\n\n", job_s, code,
              dir.c_str());
  analyze::TraceSet traces;
  try {
    traces = analyze::load_trace_dir(dir, f.np);
  } catch (const UsageError& e) {
    std::printf("ddx probe hang: FAIL: %s\n", e.what());
    return 1;
  }
  const analyze::Diagnosis dx = analyze::diagnose(traces);
  const std::string report = analyze::render_text(traces, dx);
  std::fwrite(report.data(), 1, report.size(), stdout);
  if (const int64_t planted = probes::planted_fault_unix_ms(dir)) {
    std::printf("\nddx probe hang: verdict %.1f s after the fault was planted (collective timeout %s)\n",
                (unix_now_ms() - planted) / 1000.0, format_duration(job.timeout).c_str());
  }
  std::string problem = probes::check_verdict(job, dx);
  if (problem.empty() && job.scenario == probes::HangScenario::Healthy && code != 0) {
    problem = "the healthy job failed (launcher exit " + std::to_string(code) + ")";
  }
  if (!problem.empty()) {
    std::printf("\nddx probe hang: FAIL (%s): %s\n", f.scenario.c_str(), problem.c_str());
    return 1;
  }
  const auto expected = probes::expected_verdict(job);
  if (expected.kinds.empty()) {
    std::printf("\nddx probe hang: PASS (healthy): no problem reported\n");
  } else {
    std::printf("\nddx probe hang: PASS (%s): the diagnosis names rank %d and %s\n", f.scenario.c_str(),
                f.culprit, dx.findings.front().op.c_str());
  }
  return 0;
}

}  // namespace

Subcommand add_hang_command(CLI::App& probe) {
  auto f = std::make_shared<HangFlags>();
  CLI::App* cmd = probe.add_subcommand(
      "hang",
      "Run a small job under ddx launch that hangs on purpose, let the watchdog fire, analyze the "
      "flight recorder dumps and check that the diagnosis names the planted culprit and op. Exit 0 "
      "when it does.\n  ddx probe hang --scenario mismatched-op --culprit-rank 0 -np 4 --timeout 2s");
  std::string names;
  for (const auto& n : probes::hang_scenario_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--scenario", f->scenario, "One of: " + names)->capture_default_str();
  cmd->add_option("--culprit-rank", f->culprit, "The rank that misbehaves")->capture_default_str();
  cmd->add_option("-p,--nproc-per-node,--np", f->np, "Ranks (also -np N)")->type_name("N")->capture_default_str();
  cmd->add_flag("-n", f->np_marker)->group("");
  cmd->add_option("--backend", f->backend, "gloo (CPU tensors) or nccl (one GPU per rank)")
      ->check(CLI::IsMember({"gloo", "nccl"}))
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout, "The watchdog's collective timeout (2s, 500ms, ...)")->capture_default_str();
  cmd->add_option("--trace-dir", f->trace_dir, "Where the dumps and logs go (default: a new directory in $TMPDIR)");
  cmd->add_flag("--check-collectives", f->check_collectives,
                "Compare collective fingerprints across ranks before each collective (mismatches fail at once)");
  cmd->add_flag("--quiet", f->quiet, "Do not show the ranks' output (it stays in <trace-dir>/logs)");
  cmd->add_flag("--worker", f->worker, "Internal: run as one rank of the job")->group("");
  return {cmd, [f, cmd]() {
            if (f->np_marker && cmd->count("-p") == 0) {
              throw UsageError("ddx probe hang: -n is not a flag; use -np N");
            }
            return f->worker ? run_worker(*f) : run_probe(*f);
          }};
}

}  // namespace ddx::cli
