#include "node/rank_probe.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#ifdef DDX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>

#include "ddx/processes/atomic_file.h"
#include "ddx/collectives.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/store_gather.h"
#include "ddx/text/text.h"
#include "ddx/errors/verdict.h"

namespace ddx::node {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void synchronize(const Placement& where) {
  if (where.cuda) torch::cuda::synchronize(where.device_index);
}

// What the kernels ran on, by the name the expectations table matches (harness/validate/expectations.h).
std::string device_name(const Placement& where) {
#ifdef DDX_WITH_CUDA
  if (where.cuda) return at::cuda::getDeviceProperties(where.device_index)->name;
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  }
  return where.cuda ? "cuda" : "cpu";
}

// The most ranks any host holds.
int max_local_world_size(World& world) {
  at::Tensor n = torch::full({1}, world.info().local_world_size, torch::kInt64);
  all_reduce(world.world(), n, ReduceOp::Max).wait();
  return static_cast<int>(n.item<int64_t>());
}

// Every rank's trials of one kernel, appended to `trials`, a barrier before each so that ranks
// are timed at the same moment. On a GPU every rank has its own device and all measure at once,
// as they will train. On CPU the ranks of a host share its cores and memory: measured together,
// an oversubscribed host (more ranks than cores, as on a 2-core CI machine) makes whichever ranks
// share a core look slow. So there they take turns (`turns` > 1), one local rank of every host at
// a time, each on its share of threads.
void measure_kernel(World& world, const Kernel& k, const Placement& where, const ProbeSettings& s, int turns,
                    std::vector<double>& trials) {
  const int my_turn = world.info().local_rank % turns;
  k.run();  // warm-up: first-touch pages, kernel selection, caches
  synchronize(where);
  for (int t = 0; t < s.trials; ++t) {
    for (int turn = 0; turn < turns; ++turn) {
      barrier(world.world()).wait();
      if (turn == my_turn) trials.push_back(time_trial(k, where, s.min_trial_s));
    }
  }
  if (world.rank() == 0) log::info(k.metric.label, ": ", trials.size(), " trials done");
}

// The last line of `text`, without its newline.
std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t newline = text.rfind('\n', end);
  const size_t start = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(start, end + 1 - start);
}

json samples_to_json(const RankSamples& r) {
  return {{"rank", r.rank}, {"local_rank", r.local_rank}, {"host", r.host}, {"device", r.device}, {"trials", r.trials}};
}

RankSamples samples_from_json(const json& j) {
  RankSamples r;
  r.rank = j.at("rank").get<int>();
  r.local_rank = j.at("local_rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.device = j.value("device", "");
  r.trials = j.at("trials").get<std::map<std::string, std::vector<double>>>();
  return r;
}

Placement place(const ProbeSettings& s, const RendezvousInfo& info) {
  Placement where;
  const bool have_cuda = torch::cuda::is_available();
  if (s.device == "cuda" && !have_cuda) {
    throw UsageError("--device cuda: no CUDA device is visible to rank " + std::to_string(info.rank));
  }
  where.cuda = s.device == "cuda" || (s.device == "auto" && have_cuda);
  if (where.cuda) where.device_index = info.local_rank % static_cast<int>(torch::cuda::device_count());
  return where;
}

int run_probe(const std::string& name, const ProbeSettings& s,
              const std::function<std::vector<Kernel>(const Placement&)>& make_kernels) {
  log::configure_from_env();
  const RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  // Rank 0 writes the JSON at the end: a path it cannot write stops it before the trials.
  if (info.rank == 0 && !s.json_path.empty()) check_output_file("--json", s.json_path);
  const Placement where = place(s, info);
  ProcessGroupOptions pg;
  pg.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(s.timeout_s * 1000));
  pg.store_timeout = pg.collective_timeout;
  pg.enable_nccl = false;  // the barriers go over Gloo: a sick GPU must not stop its own diagnosis
  auto world = World::init(info, pg);
  const std::vector<Kernel> kernels = make_kernels(where);
  std::vector<Metric> metrics;
  for (const Kernel& k : kernels) metrics.push_back(k.metric);
  OutlierRule rule;
  rule.margin = s.margin >= 0 ? s.margin : where.cuda ? 0.10 : 0.25;
  const int turns = where.cuda || s.concurrent ? 1 : max_local_world_size(*world);

  RankSamples mine;
  mine.rank = world->rank();
  mine.local_rank = info.local_rank;
  mine.host = world->info().hostname;
  mine.device = device_name(where);
  for (const Kernel& k : kernels) measure_kernel(*world, k, where, s, turns, mine.trials[k.metric.key]);
  // Every rank sees every rank's trials and reaches the same verdict. When it names someone, the
  // metrics it named are measured again, as many trials more: a competitor that came and went
  // (another job's burst, a build on a shared node) does not survive that, a throttled or sick
  // rank is as slow again.
  auto exchange = [&](const std::string& round) {
    std::vector<RankSamples> ranks;
    for (const auto& t : gather_on_all_ranks(*world, "node/" + name + "/" + round, samples_to_json(mine).dump())) {
      ranks.push_back(samples_from_json(json::parse(t)));
    }
    return ranks;
  };
  std::vector<RankSamples> ranks = exchange("first");
  Verdict verdict = judge(metrics, ranks, rule);
  std::vector<std::string> rechecked;
  if (!verdict.passed() && verdict.inconclusive.empty()) {
    std::set<std::string> named;
    for (const auto& f : verdict.ranks) named.insert(f.metric);
    for (const auto& f : verdict.hosts) named.insert(f.metric);
    for (const Kernel& k : kernels) {
      if (!named.count(k.metric.key)) continue;
      measure_kernel(*world, k, where, s, turns, mine.trials[k.metric.key]);
      rechecked.push_back(k.metric.label);
    }
    ranks = exchange("again");
    verdict = judge(metrics, ranks, rule);
  }
  const std::string report = format_report(name, metrics, ranks, verdict, rule);
  if (world->rank() == 0) {
    std::printf("# device: %s, rank 0 on %s\n", where.cuda ? "cuda (one GPU per local rank)" : "cpu",
                ranks.front().device.c_str());
    if (!rechecked.empty()) {
      std::printf("# measured again, %d trials more, after a first pass named someone: %s\n", s.trials,
                  join(rechecked).c_str());
    }
    std::fputs(report.c_str(), stdout);
    std::fflush(stdout);
    if (!s.json_path.empty()) {
      json out = to_json(name, metrics, ranks, verdict, rule);
      out["device"] = where.cuda ? "cuda" : "cpu";
      write_file_atomically(s.json_path, out.dump(2) + "\n");
    }
  }
  // The same verdict on every rank, so every rank ends with its code and says it (ddx/errors/verdict.h):
  // a launcher reports the verdict, not the first rank to exit as a failure. Its line is the
  // report's last, the summary that names the slow ranks and hosts.
  const int rc = verdict.passed() ? 0 : 1;
  if (rc != 0) write_verdict_report(last_line(report), rc);
  world->shutdown();
  return rc;
}

}  // namespace

double time_trial(const Kernel& k, const Placement& where, double min_trial_s) {
  synchronize(where);
  const auto start = Clock::now();
  int runs = 0;
  double seconds = 0;
  do {
    k.run();
    ++runs;
    synchronize(where);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (seconds < min_trial_s);
  return k.work * runs / seconds / k.scale;
}

cli::Subcommand add_rank_probe_command(CLI::App& probe, const std::string& name, const std::string& description,
                                       const std::function<void(CLI::App&)>& add_flags,
                                       const std::function<std::vector<Kernel>(const Placement&)>& make_kernels) {
  auto s = std::make_shared<ProbeSettings>();
  CLI::App* cmd = probe.add_subcommand(name, description);
  cmd->add_option("--trials", s->trials, "Timed trials per kernel and rank (each rank's figure is its best trial)")
      ->check(CLI::Range(kMinTrials, 100000))
      ->capture_default_str();
  cmd->add_option("--margin", s->margin,
                  "Name a rank or host whose median is this fraction below its peers' median (default 0.25 on CPU, "
                  "0.10 on GPU)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--min-trial-time", s->min_trial_s, "Seconds each trial repeats its kernel")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  cmd->add_option("--device", s->device, "cpu, cuda (this rank's GPU: local rank modulo the GPUs), or auto")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--json", s->json_path, "Write every rank's trials and the verdict as JSON (rank 0)");
  cmd->add_option("--timeout", s->timeout_s, "Seconds before the rendezvous or a barrier gives up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  cmd->add_flag("--concurrent", s->concurrent,
                "On CPU, time the ranks of a host at once (default: in turns, so ranks sharing cores are not "
                "mistaken for slow ones; on GPU always at once)");
  add_flags(*cmd);
  return {cmd, [name, s, make_kernels]() { return run_probe(name, *s, make_kernels); }};
}

}  // namespace ddx::node
