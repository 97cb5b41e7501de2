// The bandwidth probe's own overhead: for the gloo and mpi engines, the probe's busbw against a
// minimal hand-written timing loop of the same collective, in the same run, alternating rounds
// so both see the same machine load. Prints the ratio probe / hand loop per size (target:
// within 5 %). Run it like the probe:
//   ddx launch --nproc-per-node 2 -- build/bin/bandwidth_overhead_bench --engine gloo
//   mpiexec -n 2 build/bin/bandwidth_overhead_bench --engine mpi
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bandwidth/collective.h"
#include "bandwidth/engines/mpi_engine.h"
#include "bandwidth/harness.h"
#include "bandwidth/sizes.h"
#include "bandwidth/stats.h"
#include "bandwidth/torch/gloo_engine.h"
#include "ddx/collectives.h"
#include "ddx/processes/env.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"

namespace {

using namespace ddx;
using namespace ddx::bw;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
  std::string engine = "gloo";
  std::vector<size_t> sizes{1 << 20, 16 << 20};
  int iters = 20;
  int rounds = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--engine") a.engine = value;
    if (flag == "--iters") a.iters = std::stoi(value);
    if (flag == "--rounds") a.rounds = std::stoi(value);
    if (flag == "--sizes") {
      a.sizes.clear();
      size_t start = 0;
      while (start <= value.size()) {
        const size_t comma = value.find(',', start);
        a.sizes.push_back(parse_bytes("--sizes", value.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  }
  return a;
}

// Mean over ranks of each rank's mean op time, like the probe (nccl-tests -a 1).
double mean_over_ranks(Coordinator& coord, double seconds) {
  double sum = 0;
  for (const auto& s : coord.all_gather(std::to_string(seconds))) sum += std::stod(s);
  return sum / coord.size();
}

// The hand-written loops: what a user would time without the probe.
double hand_gloo(Group& g, size_t bytes, int iters) {
  at::Tensor t = torch::ones({static_cast<int64_t>(bytes / 4)}, torch::kFloat32);
  for (int i = 0; i < 2; ++i) all_reduce(g, t).wait();  // the probe's warm-up + sync op
  barrier(g).wait();
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) all_reduce(g, t).wait();
  return (now_s() - t0) / iters;
}

double hand_mpi(size_t bytes, int iters) {
  std::vector<float> in(bytes / 4, 1.0f), out(bytes / 4);
  const int count = static_cast<int>(in.size());
  for (int i = 0; i < 2; ++i) MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return (now_s() - t0) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  RendezvousInfo info = resolve_rendezvous(current_env());
  std::unique_ptr<World> world;
  std::unique_ptr<Coordinator> coord;
  std::unique_ptr<Engine> engine;
  bool mpi_here = false;
  if (args.engine == "mpi") {
    mpi_here = ensure_mpi_initialized();
    coord = make_mpi_coordinator();
    engine = make_mpi_engine(info.local_world_size);
  } else {
    world = World::init(info);
    coord = make_store_coordinator(world->store(), world->rank(), world->size());
    engine = make_gloo_engine(world->world(), info.local_world_size);
  }
  const int n = engine->size();
  // Gloo's all_reduce is in place (out of place adds a copy), MPI's natural form is out of
  // place: compare each engine's probe column with the loop that matches it.
  const bool use_in_place = args.engine != "mpi";
  Watchdog watchdog(0, "bench");
  RankInfo me;
  me.rank = engine->rank();
  if (engine->rank() == 0) {
    std::printf("# bandwidth probe overhead: engine %s, %d ranks, all_reduce float sum, %d iters, median of %d rounds (%s)\n",
                args.engine.c_str(), n, args.iters, args.rounds, use_in_place ? "in-place column" : "out-of-place column");
    std::printf("#      size  probe_busbw   hand_busbw  probe/hand\n#       (B)       (GB/s)       (GB/s)\n");
  }
  for (size_t bytes : args.sizes) {
    BandwidthOptions o;
    o.engine = args.engine;
    o.min_bytes = o.max_bytes = bytes;
    o.iters = args.iters;
    o.warmup_iters = 1;
    o.check_iters = 0;
    o.timeout_s = 0;
    std::vector<double> probe, hand;
    auto run_probe = [&] {
      SweepReport report = run_sweep(*engine, *coord, o, watchdog, me, {});
      if (engine->rank() == 0) {
        const Row& row = report.rows.at(0);
        probe.push_back(use_in_place ? row.in_place.busbw : row.out_of_place.busbw);
      }
    };
    auto run_hand = [&] {
      const double sec = args.engine == "mpi" ? hand_mpi(bytes, args.iters) : hand_gloo(world->world(), bytes, args.iters);
      hand.push_back(busbw_gbs(all_reduce_def(), bytes / 4, 4, n, mean_over_ranks(*coord, sec)));
    };
    // Alternate which goes first, so neither always runs on a warmer machine.
    for (int round = 0; round < args.rounds; ++round) {
      if (round % 2 == 0) {
        run_probe();
        run_hand();
      } else {
        run_hand();
        run_probe();
      }
    }
    if (engine->rank() == 0) {
      const double p = median(probe), h = median(hand);
      std::printf("%11zu  %11.4f  %11.4f  %10.3f\n", bytes, p, h, h > 0 ? p / h : 0.0);
      std::fflush(stdout);
    }
  }
  coord->finish();
  engine.reset();
  coord.reset();
  if (world) world->shutdown();
  if (mpi_here) finalize_mpi();
  return 0;
}
