// `ddx top`: a live view of a running ddx job and its nodes (docs/top.md). The job is read
// from its store (the ranks' heartbeats, read-only), the nodes from NVML or /proc on this
// host and over ssh for --hosts; alarms go to the screen and, when asked or with --run, to a
// JSONL event log.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/flight_recorder.h"
#include "ddx/rendezvous/job_file.h"
#include "ddx/rendezvous/net_interface.h"
#include "ddx/watchdog/store_observer.h"
#include "ddx/watchdog/watchdog.h"
#include "doctor/doctor_facts.h"
#include "top/event_log.h"
#include "top/job_monitor.h"
#include "top/node_stats.h"
#include "top/ssh_hosts.h"
#include "top/top_command.h"
#include "top/top_render.h"
#include "top/tui.h"

namespace ddx::cli {
namespace {

using namespace ddx::top;
using Clock = std::chrono::steady_clock;

struct TopOptions {
  std::string run_dir;
  std::string master_addr;
  int master_port = 0;
  std::string hosts_file;
  std::string ssh = "ssh -o BatchMode=yes -o ConnectTimeout=5";
  int poll_ms = 1000;
  bool once = false;
  bool json = false;
  int count = 0;
  std::string stall_after;
  double straggler_factor = 1.5;
  double memory_alarm = 0.95;
  std::string events;
};

// The job's store is gone: said in one line, with why ddx top thinks so, instead of c10d's.
struct JobUnreachable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether a plain TCP connection to host:port succeeds within 2 s; else why not, as
// one clause ("refuses connections (Connection refused)"). Tried before c10d's client connects:
// that client retries a refused port for its whole timeout and prints warnings with C++
// backtraces, where a finished job's port refuses at once.
struct PortCheck {
  bool answers = false;
  bool resolves = true;
  std::string why;
};

PortCheck check_port(const std::string& host, int port) {
  constexpr int kConnectTimeoutMs = 2000;
  PortCheck c;
  std::string resolve_error;
  const std::vector<std::string> addresses = resolve_host(host, &resolve_error);
  if (addresses.empty()) {
    c.resolves = false;
    c.why = host + " does not resolve (" + resolve_error + ")";
    return c;
  }
  for (const std::string& address : addresses) {
    const nlohmann::json link = doctor::connect_to(host, address, port, kConnectTimeoutMs);
    c.answers = link.value("ok", false);
    if (c.answers) return c;
    if (c.why.empty()) c.why = "refuses connections (" + link.value("error", std::string("no answer")) + ")";
  }
  return c;
}

// The job's store, reconnected after a failure; world size learnt from the heartbeats.
class JobSource {
 public:
  JobSource(std::string addr, int port, int world_size) : addr_(std::move(addr)), port_(port), world_size_(world_size) {}
  // With --run: rank 0's host and pid from job.json, so a store that is gone can be told apart
  // from one this host cannot reach.
  void set_job_file(const JobFile& job, std::string path) {
    rank0_host_ = job.host;
    rank0_pid_ = job.pid;
    job_file_ = std::move(path);
  }
  std::string name() const { return addr_ + ":" + std::to_string(port_); }
  void connect() {
    const PortCheck port = check_port(addr_, port_);
    if (!port.answers) throw JobUnreachable(unreachable_message(port));
    store_ = observe_job_store(addr_, port_, std::chrono::milliseconds(3000));
  }

  // Heartbeats of every rank; throws JobUnreachable when the store's port refuses, and
  // std::runtime_error when c10d cannot read it.
  std::map<int, std::string> read() {
    if (!store_) connect();
    try {
      if (world_size_ <= 0) {
        // Rank 0's heartbeat says the world size; without it, look for any rank's.
        auto first = store_->read_heartbeats(1);
        if (first.empty()) first = store_->read_heartbeats(kProbeRanks);
        for (const auto& [rank, text] : first) {
          auto hb = nlohmann::json::parse(text, nullptr, false);
          if (hb.is_object() && hb.value("world_size", 0) > 0) world_size_ = hb["world_size"].get<int>();
        }
        if (world_size_ <= 0) return {};
      }
      return store_->read_heartbeats(world_size_);
    } catch (const std::exception&) {
      store_.reset();
      throw;
    }
  }
  int world_size() const { return std::max(world_size_, 0); }

 private:
  // One line: the job appears to have ended (its store's port refuses, and rank 0's process is
  // gone when this host can tell), or the store cannot be reached for another reason.
  std::string unreachable_message(const PortCheck& port) const {
    const std::string store = "the job's store at " + name();
    if (!port.resolves) return "cannot reach " + store + ": " + port.why;
    if (rank0_pid_ <= 0 || rank0_host_ != local_hostname()) return "the job appears to have ended: " + store + " " + port.why;
    const std::string rank0 = "rank 0 (pid " + std::to_string(rank0_pid_) + " on " + rank0_host_ + ", from " + job_file_ + ")";
    const bool rank0_alive = ::kill(rank0_pid_, 0) == 0 || errno == EPERM;
    if (rank0_alive) return "cannot reach " + store + ": it " + port.why + ", although " + rank0 + " is still running";
    return "the job appears to have ended: " + store + " " + port.why + " and " + rank0 + " is no longer running";
  }

  static constexpr int kProbeRanks = 64;
  std::string addr_;
  int port_;
  int world_size_;
  std::string rank0_host_, job_file_;
  int rank0_pid_ = 0;
  std::unique_ptr<StoreObserver> store_;
};

// Nodes of this refresh: this host (NVML or /proc), hosts known only from the ranks'
// heartbeats, and the --hosts polled over ssh (merged into a job host of the same name).
std::vector<NodeView> collect_nodes(const Screen& s, const top::Nvml& nvml, const std::vector<std::string>& hosts,
                                    const TopOptions& o) {
  const std::string me = local_hostname();
  std::map<std::string, std::vector<const RankRow*>> by_host;
  for (const RankRow& r : s.ranks) {
    if (r.has_heartbeat) by_host[r.host].push_back(&r);
  }
  std::vector<NodeView> nodes;
  if (s.job.empty() && hosts.empty()) nodes.push_back(local_node(nvml, {}));
  for (const auto& [host, ranks] : by_host) {
    if (host == me) {
      std::vector<int> pids;
      for (const RankRow* r : ranks) pids.push_back(r->pid);
      nodes.push_back(local_node(nvml, pids));
      continue;
    }
    NodeView n;
    n.host = host;
    n.source = "heartbeats";
    n.gpu_note = "GPU and CPU numbers of other hosts: --hosts";
    n.ranks = static_cast<int>(ranks.size());
    n.processes = 0;
    for (const RankRow* r : ranks) {
      if (!r->stalled) ++n.processes;
      n.rss_bytes += r->rss_bytes;
    }
    nodes.push_back(n);
  }
  if (!hosts.empty()) {
    const auto timeout = std::chrono::milliseconds(std::max(o.poll_ms * 5, 10000));
    for (NodeView& polled : poll_hosts(hosts, o.ssh, timeout)) {
      bool merged = false;
      for (NodeView& n : nodes) {
        if (n.host != polled.host || n.source == "nvml") continue;
        n.gpus = polled.gpus;
        n.gpu_processes = polled.gpu_processes;
        n.gpu_note = polled.gpu_note;
        n.problems = polled.problems;
        n.source = "ssh";
        merged = true;
      }
      if (!merged) nodes.push_back(polled);
    }
  }
  return nodes;
}

int run_top(TopOptions o) {
  if (o.poll_ms < 100) throw UsageError("--poll-freq " + std::to_string(o.poll_ms) + " is below 100 ms");
  if (o.straggler_factor <= 1) throw UsageError("--straggler-factor must be above 1");
  if (o.memory_alarm <= 0 || o.memory_alarm > 1) throw UsageError("--memory-alarm must be in (0, 1]");
  if (!o.run_dir.empty() && (o.master_port || !o.master_addr.empty())) {
    throw UsageError("--run and --master-addr/--master-port both name the job; give one");
  }
  if (!o.master_addr.empty() && !o.master_port) throw UsageError("--master-addr needs --master-port");
  MonitorOptions mo;
  if (!o.stall_after.empty()) mo.stall_after = parse_duration("--stall-after", o.stall_after);
  mo.straggler_factor = o.straggler_factor;
  mo.memory_alarm = o.memory_alarm;

  std::unique_ptr<JobSource> job;
  if (!o.run_dir.empty()) {
    const JobFile f = read_job_file(o.run_dir);
    job = std::make_unique<JobSource>(f.master_addr, f.master_port, f.world_size);
    job->set_job_file(f, job_file_path(o.run_dir));
    // The job's own folder is where its alarms belong; without --run nothing is logged unless
    // --events names a file, so ddx top never leaves a file in the current folder.
    if (o.events.empty()) o.events = o.run_dir + "/top-events.jsonl";
  } else if (o.master_port) {
    job = std::make_unique<JobSource>(o.master_addr.empty() ? "127.0.0.1" : o.master_addr, o.master_port, 0);
  }
  const std::vector<std::string> hosts = o.hosts_file.empty() ? std::vector<std::string>{} : read_hosts_file(o.hosts_file);
  if (job) {
    try {
      job->connect();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      std::fprintf(stderr, "ddx top: %s\n", what.substr(0, what.find('\n')).c_str());
      return 1;
    }
  }
  // Opened once the job answers: a job that has ended gets no event log in its folder.
  std::unique_ptr<EventLog> events = o.events.empty() ? nullptr : std::make_unique<EventLog>(o.events);

  top::Nvml nvml;
  JobMonitor monitor(mo);
  int polls = 0;
  auto refresh = [&]() {
    Screen s;
    s.poll = ++polls;
    s.unix_ms = unix_now_ms();
    if (job) {
      s.job = job->name();
      std::map<int, std::string> heartbeats;
      try {
        heartbeats = job->read();
      } catch (const JobUnreachable& e) {
        s.job_error = e.what();
      } catch (const std::exception& e) {
        const std::string what = e.what();
        s.job_error = "unreachable (" + what.substr(0, what.find('\n')) + "): has the job ended?";
      }
      if (s.job_error.empty()) {
        const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
        monitor.observe_job(heartbeats, job->world_size(), now_ms, unix_now_ms(), s);
      }
    }
    s.nodes = collect_nodes(s, nvml, hosts, o);
    monitor.observe_nodes(s);
    if (events) events->update(s);
    return s;
  };

  const auto poll = std::chrono::milliseconds(o.poll_ms);
  if (!o.once && !o.json && o.count == 0 && ::isatty(STDOUT_FILENO) && ::isatty(STDIN_FILENO)) {
    return run_tui(refresh, poll);
  }
  const int count = o.once ? 1 : o.count;
  bool failed = false;
  for (int i = 0; count == 0 || i < count; ++i) {
    const auto next = Clock::now() + poll;
    const Screen s = refresh();
    failed = !s.job_error.empty();
    if (o.json) {
      std::printf("%s\n", screen_json(s).c_str());
    } else {
      if (i > 0) std::printf("\n");
      for (const Line& line : render_screen(s, SortKey::Rank, false)) std::printf("%s\n", line.text.c_str());
    }
    std::fflush(stdout);
    if (count == 0 || i + 1 < count) std::this_thread::sleep_until(next);
  }
  return failed ? 1 : 0;
}

}  // namespace

Subcommand add_top_command(CLI::App& app) {
  auto o = std::make_shared<TopOptions>();
  CLI::App* cmd = app.add_subcommand(
      "top", "Live view of a running job and its nodes: per-rank step, tokens/s, step time, comm wait and last "
             "collective; GPU (NVML) or CPU use per node; alarms for stalled ranks, stragglers, power and process "
             "drops, memory near the limit");
  cmd->add_option("--run", o->run_dir, "Run folder of a ddx train job (where its metrics.jsonl and job.json are)");
  cmd->add_option("--master-addr", o->master_addr, "Host of the job's store (rank 0)");
  cmd->add_option("--master-port", o->master_port, "Port of the job's store")->check(CLI::Range(1, 65535));
  cmd->add_option("--hosts", o->hosts_file, "File of hosts (one per line) polled with nvidia-smi over ssh");
  cmd->add_option("--ssh", o->ssh, "The ssh command for --hosts")->capture_default_str();
  cmd->add_option("--poll-freq", o->poll_ms, "Milliseconds between refreshes")->capture_default_str();
  cmd->add_flag("--once", o->once, "One refresh, printed as text (or JSON with --json), then exit");
  cmd->add_flag("--json", o->json, "Print each refresh as one line of JSON");
  cmd->add_option("--count", o->count, "Stop after this many refreshes (0: until interrupted)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--stall-after", o->stall_after,
                  "A heartbeat older than this is a stalled rank (default: twice the ranks' heartbeat interval)");
  cmd->add_option("--straggler-factor", o->straggler_factor,
                  "A rank whose time per step outside collectives exceeds this times the median is a straggler")
      ->capture_default_str();
  cmd->add_option("--memory-alarm", o->memory_alarm, "Fraction of a GPU's (or the host's) memory that raises an alarm")
      ->capture_default_str();
  cmd->add_option("--events", o->events,
                  "JSONL log of alarms raised and cleared, appended to (default: <run folder>/top-events.jsonl with "
                  "--run, else none)");
  return {cmd, [o] { return run_top(*o); }};
}

}  // namespace ddx::cli
