// What the flight recorder costs each collective: one OpRecord through on_enqueue, on_start
// and on_end, as the collective layer calls them (via notify_*), against the same calls with no
// observer registered. The budget is well under a microsecond per collective.
#include <benchmark/benchmark.h>

#include "ddx/watchdog/flight_recorder.h"

namespace {

ddx::OpRecord realistic_record() {
  ddx::OpRecord r;
  r.group = "world";
  r.group_ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  r.op = ddx::OpType::AllReduce;
  r.reduce_op = "sum";
  r.dtype = "bfloat16";
  r.in_shape = r.out_shape = {4096, 1024};
  r.numel = 4096 * 1024;
  r.bytes = r.numel * 2;
  r.backend = "nccl";
  r.call_site = "step 12 backward bucket 3";
  return r;
}

void one_collective(ddx::OpRecord& r, uint64_t& id) {
  r.id = ++id;
  r.seq = id;
  r.state = ddx::OpState::Scheduled;
  r.t_enqueue_us = ddx::steady_now_us();
  ddx::notify_enqueue(r);
  r.state = ddx::OpState::Started;
  r.t_start_us = ddx::steady_now_us();
  ddx::notify_start(r);
  r.state = ddx::OpState::Completed;
  r.t_end_us = ddx::steady_now_us();
  ddx::notify_end(r);
}

// Reference: the same notifications with nobody listening.
void BM_NoObserver(benchmark::State& state) {
  ddx::OpRecord r = realistic_record();
  uint64_t id = 0;
  for (auto _ : state) one_collective(r, id);
}
BENCHMARK(BM_NoObserver);

void BM_FlightRecorder(benchmark::State& state) {
  ddx::FlightRecorder recorder(static_cast<size_t>(state.range(0)));
  ddx::add_op_observer(&recorder);
  ddx::OpRecord r = realistic_record();
  uint64_t id = 0;
  for (auto _ : state) one_collective(r, id);
  ddx::remove_op_observer(&recorder);
}
BENCHMARK(BM_FlightRecorder)->Arg(2000)->Arg(20000);

// Several async ops in flight before they end (bucketed gradients): on_end searches further back.
void BM_FlightRecorderEightInFlight(benchmark::State& state) {
  ddx::FlightRecorder recorder(2000);
  ddx::add_op_observer(&recorder);
  std::vector<ddx::OpRecord> ops(8, realistic_record());
  uint64_t id = 0;
  for (auto _ : state) {
    for (auto& r : ops) {
      r.id = ++id;
      r.seq = id;
      r.t_enqueue_us = ddx::steady_now_us();
      r.state = ddx::OpState::Scheduled;
      ddx::notify_enqueue(r);
      r.state = ddx::OpState::Started;
      ddx::notify_start(r);
    }
    for (auto& r : ops) {
      r.state = ddx::OpState::Completed;
      r.t_end_us = ddx::steady_now_us();
      ddx::notify_end(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * 8);
  ddx::remove_op_observer(&recorder);
}
BENCHMARK(BM_FlightRecorderEightInFlight);

}  // namespace

BENCHMARK_MAIN();
