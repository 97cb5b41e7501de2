// `ddx probe bandwidth` on the command line: nccl-tests' flags, the rendezvous of whichever
// launcher started us, one of three engines, the sweep (or the pairwise matrix), and rank 0's
// reports. Exit codes: 0 all good; 1 wrong values, --min-busbw not met or slow links (--pairs);
// 2 bad usage; 3 a rank died, hung (-T) or an op failed.
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "bandwidth/engines/mpi_engine.h"
#include "bandwidth/engines/nccl_engine.h"
#include "bandwidth/harness.h"
#include "bandwidth/options.h"
#include "bandwidth/report.h"
#include "bandwidth/sizes.h"
#include "bandwidth/torch/bandwidth_command.h"
#include "bandwidth/torch/gloo_engine.h"
#include "ddx/processes/atomic_file.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/text/text.h"
#include "ddx/errors/verdict.h"
#include "faults/faults.h"

namespace ddx::cli {
namespace {

using namespace ddx::bw;

// Flag values as typed, turned into BandwidthOptions once parsed (so errors name the flag).
struct Flags {
  BandwidthOptions o;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  std::string datatypes = "float", ops = "sum", op_list = "all_reduce";
  double min_busbw = -1;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

template <typename T, typename Parse, typename All>
std::vector<T> parse_list(const std::string& flag, const std::string& text, Parse parse, All all) {
  if (text == "all") return all();
  std::vector<T> out;
  for (const auto& item : split_list(text)) {
    auto v = parse(item);
    if (!v) {
      std::vector<std::string> known;
      for (T value : all()) known.push_back(name(value));
      known.push_back("all");
      const std::string guess = nearest_spelling(item, known);
      throw UsageError(flag + " '" + item + "' is not one of: " + join(known) +
                       (guess.empty() ? "" : " (did you mean " + guess + "?)"));
    }
    out.push_back(*v);
  }
  if (out.empty()) throw UsageError(flag + " is empty");
  return out;
}

void finish_options(Flags& f) {
  BandwidthOptions& o = f.o;
  o.min_bytes = parse_bytes("-b/--minbytes", f.min_bytes);
  o.max_bytes = parse_bytes("-e/--maxbytes", f.max_bytes);
  o.step_bytes = parse_bytes("-i/--stepbytes", f.step_bytes);
  o.types = parse_list<DataType>("-d/--datatype", f.datatypes, parse_datatype, all_datatypes);
  o.ops = parse_list<RedOp>("-o/--op", f.ops, parse_redop, all_redops);
  o.collectives = parse_list<Collective>("--op-list", f.op_list, parse_collective, all_collectives);
  if (f.min_busbw >= 0) o.min_busbw = f.min_busbw;
}

// Rank 0 writes the reports, each exactly at the path named (replaced atomically, as --csv and
// --plot always were): a path it cannot write stops the probe before the sweep, not after it.
void check_report_paths(const BandwidthOptions& o) {
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
  if (!o.csv_path.empty()) check_output_file("--csv", o.csv_path);
  if (!o.plot_path.empty()) check_output_file("--plot", o.plot_path);
}

std::string now_text() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

void write_output(const std::string& flag, const std::string& path, const std::string& content) {
  try {
    write_file_atomically(path, content);
  } catch (const std::exception& e) {
    throw UsageError(flag + " " + path + ": " + e.what());
  }
}

// The command line as typed, for the JSON `args` (the subcommand does not see argv).
std::vector<std::string> command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

std::string resolve_engine(const std::string& wanted) {
  if (wanted != "auto") return wanted;
  return nccl_engine_built() && torch::cuda::is_available() ? "nccl" : "gloo";
}

// Runs on every rank; returns the exit code every rank agrees on.
int run_probe(const RendezvousInfo& info, BandwidthOptions& o, const std::string& engine_name) {
  const std::string who = "rank " + std::to_string(info.rank) + " (host " + info.hostname + ")";
  Watchdog watchdog(o.timeout_s, who);
  std::unique_ptr<World> world;
  std::unique_ptr<Coordinator> coord;
  std::unique_ptr<Engine> engine;
  bool mpi_here = false;
  if (engine_name == "mpi") {
    watchdog.phase("MPI initialization");
    mpi_here = ensure_mpi_initialized();
    if (mpi_world_size() != info.world_size || mpi_world_rank() != info.rank) {
      throw UsageError("--engine mpi needs an MPI launcher (mpiexec): MPI sees rank " + std::to_string(mpi_world_rank()) +
                       "/" + std::to_string(mpi_world_size()) + " but the job has " + std::to_string(info.world_size) +
                       " ranks via " + to_string(info.source));
    }
    coord = make_mpi_coordinator();
    engine = make_mpi_engine(info.local_world_size);
  } else {
    watchdog.phase("rendezvous");
    ProcessGroupOptions pg;
    // The watchdog enforces -T with a message naming the phase; Gloo's own timeout is a
    // backstop a little later (0 = no -T: a long one).
    const double t = o.timeout_s > 0 ? o.timeout_s + 10 : 3600;
    pg.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(t * 1000));
    pg.store_timeout = pg.collective_timeout;
    pg.enable_nccl = false;  // the nccl engine drives NCCL itself; c10d never touches the GPU
    world = World::init(info, pg);
    faults::install_collective_faults(world->rank(), world->size());
    coord = make_store_coordinator(world->store(), world->rank(), world->size());
    watchdog.phase(engine_name + " engine set-up");
    if (engine_name == "gloo") {
      engine = make_gloo_engine(world->world(), info.local_world_size);
    } else {
      engine = make_nccl_engine(*coord, info.local_rank, info.local_world_size, o.timeout_s);
    }
  }
  const DeviceInfo device = engine->device();
  RankInfo me;
  me.rank = info.rank;
  me.local_rank = info.local_rank;
  me.pid = static_cast<int>(::getpid());
  me.host = info.hostname;
  me.device = engine_name == "nccl" ? device.index : info.local_rank;
  me.bus_id = device.bus_id;
  me.device_name = device.name;

  int rc = 0;
  std::string failure;  // rank 0: why the probe failed, one line
  if (o.pairs) {
    PairReport report = run_pairs(*engine, *coord, o, watchdog, me);
    if (info.rank == 0) {
      const std::string text = pairs_text(report, o);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      if (!report.slow_ranks.empty()) {
        std::vector<int> slow;
        for (const auto& rank_gbs : report.slow_ranks) slow.push_back(rank_gbs.first);
        std::sort(slow.begin(), slow.end());
        events::Event("bandwidth.slow_ranks").ranks("ranks", slow).emit();
      }
      if (!o.json_path.empty()) write_output("--json", o.json_path, pairs_json(report, o));
      if (!o.csv_path.empty()) write_output("--csv", o.csv_path, pairs_csv(report));
      rc = exit_code(report);
      // The verdict: the report's last line, "# ddx probe bandwidth --pairs: FAILED (6 links, 3 slow, ...)".
      const size_t last = text.rfind("# ddx probe bandwidth --pairs: ");
      if (rc != 0 && last != std::string::npos) failure = text.substr(last + 2, text.find('\n', last) - last - 2);
    }
  } else {
    const std::string start = now_text();
    TextReport text(stdout, o);
    SweepReport* live = nullptr;  // rows so far, for each collective's footer
    SweepReport partial;
    SweepListener listener;
    listener.started = [&](const SweepReport& r) {
      partial = r;
      live = &partial;
      text.started(r);
      if (!o.json_path.empty()) std::printf("# Writing JSON output to %s\n", o.json_path.c_str());
    };
    listener.collective_begins = [&](Collective c) { text.collective_begins(c); };
    listener.row = [&](const Row& row) {
      live->rows.push_back(row);
      text.row(row);
    };
    listener.collective_ends = [&](Collective c) { text.collective_ends(c, *live); };
    SweepReport report = run_sweep(*engine, *coord, o, watchdog, me, listener);
    if (info.rank == 0) {
      const auto verdicts = evaluate(report, o);
      text.summary(report, verdicts);
      if (!o.json_path.empty()) {
        write_output("--json", o.json_path, sweep_json(report, o, verdicts, start, now_text()));
      }
      if (!o.csv_path.empty()) write_output("--csv", o.csv_path, sweep_csv(report));
      if (!o.plot_path.empty()) write_output("--plot", o.plot_path, sweep_svg(report));
      rc = exit_code(verdicts);
      if (rc != 0) failure = "ddx probe bandwidth: " + failure_text(report, verdicts, o);
    }
  }
  watchdog.phase("sharing the verdict");
  // Every rank exits with rank 0's verdict and, when it failed, writes it into its error file as
  // a verdict (ddx/errors/verdict.h): a launcher reports the verdict, naming the collective and size at
  // fault or the slow ranks, instead of blaming whichever rank exited first.
  const std::string verdict = coord->all_gather(std::to_string(rc) + " " + failure).at(0);
  rc = std::stoi(verdict);
  const std::string why = verdict.substr(verdict.find(' ') + 1);
  if (rc != 0) write_verdict_report(why, rc);
  coord->finish();
  engine.reset();
  coord.reset();
  if (world) world->shutdown();
  if (mpi_here) finalize_mpi();
  return rc;
}

}  // namespace

Subcommand add_bandwidth_command(CLI::App& probe) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = probe.add_subcommand(
      "bandwidth",
      "Collective bandwidth with nccl-tests' flags, formulas and table (algbw, busbw, #wrong), plus "
      "per-rank and per-iteration timings, and a pairwise link matrix (--pairs). Run it under ddx "
      "launch, torchrun, srun or mpiexec.");
  cmd->add_option("-b,--minbytes", f->min_bytes, "Smallest size; K/M/G are powers of 1024")->capture_default_str();
  cmd->add_option("-e,--maxbytes", f->max_bytes, "Largest size (reduced to what memory holds)")->capture_default_str();
  cmd->add_option("-i,--stepbytes", f->step_bytes, "Additive step between sizes")->capture_default_str();
  cmd->add_option("-f,--stepfactor", f->o.step_factor, "Multiplicative step; wins over -i when > 1")
      ->check(CLI::Range(1.0, 1024.0))->capture_default_str();
  cmd->add_option("-n,--iters", f->o.iters, "Timed iterations per size")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("-w,--warmup_iters,--warmup-iters", f->o.warmup_iters, "Warm-up iterations per size")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  cmd->add_option("-c,--check", f->o.check_iters, "Check iterations per size on exact data (0: #wrong is N/A)")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_flag("--check-timed", f->o.check_timed, "Also check the output of the last timed out-of-place iteration");
  cmd->add_option("-d,--datatype", f->datatypes,
                  "int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16 (comma list) or all")
      ->capture_default_str();
  cmd->add_option("-o,--op", f->ops, "Reduction: sum,prod,min,max,avg (comma list) or all")->capture_default_str();
  cmd->add_option("--op-list", f->op_list,
                  "Collectives: all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv or all")
      ->capture_default_str();
  cmd->add_option("-r,--root", f->o.root, "Root of broadcast/reduce; -1 runs every root")->capture_default_str();
  cmd->add_option("-z,--blocking", f->o.blocking,
                  "0 async; 1 wait + barrier after each op; 2 wait; 3 wait + barrier, barrier untimed")
      ->check(CLI::Range(0, 3))->capture_default_str();
  cmd->add_option("-T,--timeout", f->o.timeout_s, "Seconds without progress before the probe gives up (0: never)")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str();
  cmd->add_option("--engine", f->o.engine, "nccl (raw NCCL, one GPU per rank), gloo (CPU) or mpi; auto picks nccl with a GPU")
      ->check(CLI::IsMember({"auto", "gloo", "mpi", "nccl"}))->capture_default_str();
  cmd->add_option("--json", f->o.json_path, "nccl-tests -J style JSON (replaces FILE)");
  cmd->add_option("--csv", f->o.csv_path, "One CSV line per size and placement");
  cmd->add_option("--plot", f->o.plot_path, "SVG of busbw vs size per collective");
  cmd->add_option("--min-busbw", f->min_busbw, "Fail (exit 1) when a collective's average busbw is below this GB/s")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_flag("--pairs", f->o.pairs, "Pairwise sendrecv matrix at -e bytes instead of the sweep");
  cmd->add_option("--pair-min-bw", f->o.pair_min_gbs, "--pairs: flag links below this GB/s")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--pair-fraction", f->o.pair_fraction, "--pairs: flag links below this fraction of the median link")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();

  return {cmd, [f]() {
            log::configure_from_env();
            RendezvousInfo info = resolve_rendezvous(current_env());
            log::set_rank(info.rank, info.world_size);
            set_error_report_rank(info.rank, info.local_rank, info.world_size);
            finish_options(*f);
            f->o.args = command_line();
            validate(f->o, info.world_size);
            if (info.rank == 0) check_report_paths(f->o);
            const std::string engine = resolve_engine(f->o.engine);
            try {
              return run_probe(info, f->o, engine);
            } catch (const UsageError&) {
              throw;
            } catch (const std::exception& e) {
              std::fprintf(stderr, "ddx: error: rank %d (host %s): probe bandwidth failed: %s\n", info.rank,
                           info.hostname.c_str(), e.what());
              std::fflush(stderr);
              return kExitTimeout;
            }
          }};
}

}  // namespace ddx::cli
