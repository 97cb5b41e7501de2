// A worker for the process-group and collective-layer tests: one scenario per run, under
// ddx launch. Prints "PASS <scenario>" and exits 0, or throws (exit via the error handlers).
#include <torch/torch.h>

#include <atomic>
#include <map>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "ddx/collectives.h"
#include "ddx/errors/error_report.h"
#include "ddx/text/log.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "models/layers.h"
#include "strategies/ddp/grad_buckets.h"
#include "strategies/fsdp/fsdp_unit.h"
#include "worker_checks.h"

using namespace ddx;
using ddx::testing::expect;
using ddx::testing::OpCounter;

namespace {

ProcessGroupOptions options(int timeout_ms) {
  ProcessGroupOptions o;
  o.collective_timeout = std::chrono::milliseconds(timeout_ms);
  o.store_timeout = std::chrono::seconds(30);
  o.enable_nccl = false;
  return o;
}

double sum_of(const std::vector<int>& ranks) {
  double s = 0;
  for (int r : ranks) s += r + 1;
  return s;
}

// Sum of (global rank + 1) over each group of a 2-D and a 3-D mesh.
void mesh(World& world) {
  expect(world.size() == 4, "mesh scenario needs 4 ranks");
  DeviceMesh& m = world.mesh({{"dp", 2}, {"tp", 2}});
  for (const char* dim : {"dp", "tp"}) {
    Group& g = m.group(dim);
    auto t = torch::full({3}, world.rank() + 1.0);
    all_reduce(g, t, ReduceOp::Sum).wait();
    expect(t[0].item<double>() == sum_of(g.global_ranks()),
           std::string(dim) + " sum " + std::to_string(t[0].item<double>()));
  }
  // TP innermost: tp groups are consecutive ranks, dp groups stride by tp.
  expect(m.group("tp").global_ranks() == std::vector<int>({world.rank() / 2 * 2, world.rank() / 2 * 2 + 1}),
         "tp group ranks");
  expect(m.group("dp").global_ranks() == std::vector<int>({world.rank() % 2, world.rank() % 2 + 2}), "dp group ranks");
  expect(m.coordinate("tp") == world.rank() % 2 && m.coordinate("dp") == world.rank() / 2, "coordinates");

  // A dimension of size 1 is legal and gives single-rank groups.
  DeviceMesh& m3 = world.mesh({{"pp", 2}, {"dp", 1}, {"tp", 2}});
  expect(m3.group("dp").size() == 1, "size-1 dimension");
  auto t = torch::full({1}, world.rank() + 1.0);
  all_reduce(m3.group("pp"), t).wait();
  expect(t.item<double>() == sum_of(m3.group("pp").global_ranks()), "pp sum");

  // A subgroup that only some ranks join.
  Group* odd = world.new_group("odd", {1, 3});
  expect((odd != nullptr) == (world.rank() % 2 == 1), "membership of odd group");
  if (odd) {
    auto x = torch::full({2}, 10.0 * world.rank());
    all_reduce(*odd, x).wait();
    expect(x[0].item<double>() == 40.0, "odd group sum");
  }
}

// Records: numbering, fields, states and call sites seen by an observer.
class Recorder : public OpObserver {
 public:
  void on_end(const OpRecord& r) override {
    std::lock_guard<std::mutex> lock(mutex);
    ended.push_back(r);
  }
  std::mutex mutex;
  std::vector<OpRecord> ended;
};

void records(World& world) {
  Recorder rec;
  add_op_observer(&rec);
  Group& g = world.world();
  const uint64_t seq0 = g.seq();
  {
    CallSite site("step 3 backward bucket 1");
    auto t = torch::ones({5, 2}, torch::kFloat64);
    all_reduce(g, t).wait();
  }
  auto in = torch::ones({4}, torch::kInt32);
  auto out = torch::zeros({4 * world.size()}, torch::kInt32);
  all_gather(g, out, in).wait();
  barrier(g).wait();
  remove_op_observer(&rec);
  std::lock_guard<std::mutex> lock(rec.mutex);
  expect(rec.ended.size() == 3, "3 records, got " + std::to_string(rec.ended.size()));
  const OpRecord& a = rec.ended[0];
  expect(a.op == OpType::AllReduce && a.group == "world" && a.seq == seq0 + 1, "all_reduce record");
  expect(a.dtype == "float64" && a.numel == 10 && a.bytes == 80 && a.reduce_op == "sum", "all_reduce fields");
  expect(a.call_site == "step 3 backward bucket 1", "call site '" + a.call_site + "'");
  expect(a.state == OpState::Completed && a.t_enqueue_us <= a.t_start_us && a.t_start_us <= a.t_end_us,
         "states and timestamps");
  expect(rec.ended[1].op == OpType::AllGather && rec.ended[1].seq == seq0 + 2 && rec.ended[1].call_site.empty(),
         "all_gather record");
  expect(rec.ended[2].op == OpType::Barrier && rec.ended[2].seq == seq0 + 3, "barrier record");
  expect(static_cast<int>(a.group_ranks.size()) == world.size(), "group ranks");
}

// Rank 1 never joins: rank 0's all-reduce fails at the collective timeout with an error that
// names the op and group, and shutting down afterwards does not block.
void timeout(World& world) {
  Group& g = world.world();
  if (world.rank() == 0) {
    auto t = torch::ones({8});
    const auto t0 = std::chrono::steady_clock::now();
    try {
      all_reduce(g, t).wait();
      throw std::runtime_error("all_reduce without peer did not fail");
    } catch (const CollectiveError& e) {
      const std::string what = e.what();
      std::printf("rank 0 error after %.1f s: %s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), what.c_str());
      expect(what.find("all_reduce") != std::string::npos && what.find("world") != std::string::npos,
             "error names op and group");
      expect(e.record().state == OpState::Failed, "record failed");
    }
    world.store().set("ddx/test/rank0-done", std::vector<uint8_t>{1});
  } else {
    world.store().wait({"ddx/test/rank0-done"});
  }
  const auto t1 = std::chrono::steady_clock::now();
  world.shutdown();
  std::printf("rank %d shutdown took %.2f s\n", world.rank(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
}

// Rank 0 leaves an all-reduce pending (rank 1 never joins) and shuts down at once: shutdown
// must not wait for the 10-minute collective timeout.
void shutdown_pending(World& world) {
  Group& g = world.world();
  if (world.rank() == 0) {
    // Rank 1 may still be in Gloo's connect through the store when rank 0 is already done with
    // its own; rank 0 leaving first would take the store away from it mid-rendezvous.
    world.store().wait({"ddx/test/rank1-ready"});
    auto t = torch::ones({8});
    Work pending = all_reduce(g, t);
    const auto t0 = std::chrono::steady_clock::now();
    world.shutdown();
    std::printf("rank 0 shutdown with a pending op took %.2f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
    std::_Exit(0);  // the abandoned backend is not destroyed
  }
  // Rank 1, its world built, lets rank 0 go on, waits until rank 0 is gone, then leaves.
  world.store().set("ddx/test/rank1-ready", std::vector<uint8_t>{1});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::_Exit(0);
}

// Layer-level parity in fp64: DDP's bucketed all-reduce and FSDP-style sharded all-gather /
// reduce-scatter against the unsharded computation, exactly, with the number of collectives
// of each kind counted through the collective layer's records.

// Rank r's gradient of parameter p: small integers, so fp64 sums are exact.
torch::Tensor rank_gradient(int rank, int p, const std::vector<int64_t>& shape) {
  auto n = 1;
  for (auto d : shape) n *= static_cast<int>(d);
  return ((torch::arange(n, torch::kFloat64) * (p + 3) + rank * 7).remainder(17) - 8).view(shape);
}

// The sum after backward (pp --dp-replicate over dp, --sequence-parallel over tp) through the
// same buckets: exact and in place, one all-reduce per bucket of at most 256 bytes (several, so
// one is packed while another is in flight); a missing and an empty gradient skipped; a
// transposed view written back through its strides into its storage.
void bucketed_gradient_sum(World& world) {
  Group& g = world.world();
  const std::vector<std::vector<int64_t>> shapes = {{7, 3}, {5}, {11, 2}, {4, 4}, {9}, {13, 5}};
  std::vector<torch::Tensor> grads, present;
  for (size_t p = 0; p < shapes.size(); ++p) grads.push_back(rank_gradient(world.rank(), static_cast<int>(p), shapes[p]));
  present = grads;
  const torch::Tensor storage = rank_gradient(world.rank(), 7, {3, 6});
  grads.push_back(storage.t());
  present.push_back(storage.t());
  grads.push_back(torch::Tensor());
  grads.push_back(torch::zeros({0}, torch::kFloat64));
  std::vector<int> order(present.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const size_t buckets = ddx::train::assign_buckets(present, order, 256, 256).size();
  expect(buckets >= 3, "several buckets, got " + std::to_string(buckets));

  OpCounter counter;
  add_op_observer(&counter);
  ddx::train::sum_gradients_in_buckets(g, grads, 256);
  remove_op_observer(&counter);
  for (size_t p = 0; p < shapes.size(); ++p) {
    auto expected = torch::zeros(shapes[p], torch::kFloat64);
    for (int r = 0; r < world.size(); ++r) expected += rank_gradient(r, static_cast<int>(p), shapes[p]);
    expect(torch::equal(grads[p], expected), "bucketed sum of gradient " + std::to_string(p));
  }
  auto expected = torch::zeros({3, 6}, torch::kFloat64);
  for (int r = 0; r < world.size(); ++r) expected += rank_gradient(r, 7, {3, 6});
  expect(torch::equal(storage, expected), "a transposed gradient summed into its storage");
  const auto counts = counter.take();
  expect(counts.size() == 1 && counts.at("all_reduce") == static_cast<int>(buckets), "one all-reduce per bucket");
}

void layer_parity(World& world) {
  Group& g = world.world();
  const int W = world.size();
  const std::vector<std::vector<int64_t>> shapes = {{7, 3}, {5}, {11, 2}, {4, 4}, {9}, {13, 5}};
  std::vector<torch::Tensor> params;
  for (const auto& s : shapes) params.push_back(torch::zeros(s, torch::kFloat64));
  std::vector<int> order;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) order.push_back(i);
  // Tiny caps so several buckets form: 64 bytes first, then 256.
  auto buckets = ddx::train::assign_buckets(params, order, 64, 256);
  expect(buckets.size() >= 3, "several buckets, got " + std::to_string(buckets.size()));

  OpCounter counter;
  add_op_observer(&counter);
  std::vector<Work> works;
  for (auto& b : buckets) {
    for (const auto& slot : b.slots) {
      b.flat.narrow(0, slot.offset, slot.numel).copy_(rank_gradient(world.rank(), slot.param, shapes[slot.param]).view({-1}));
    }
    works.push_back(all_reduce(g, b.flat, ReduceOp::Sum));
  }
  for (auto& w : works) w.wait();
  for (const auto& b : buckets) {
    for (const auto& slot : b.slots) {
      auto expected = torch::zeros(shapes[slot.param], torch::kFloat64);
      for (int r = 0; r < W; ++r) expected += rank_gradient(r, slot.param, shapes[slot.param]);
      auto got = b.flat.narrow(0, slot.offset, slot.numel).view(shapes[slot.param]);
      expect(torch::equal(got, expected), "bucketed all-reduce of parameter " + std::to_string(slot.param));
    }
  }

  // Sharding a parameter of 23 elements (padded to a multiple of W) and putting it back.
  const int64_t numel = 23, shard = (numel + W - 1) / W;
  auto full = torch::arange(numel, torch::kFloat64) * 0.5;
  auto padded = torch::zeros({shard * W}, torch::kFloat64);
  padded.narrow(0, 0, numel).copy_(full);
  auto mine = padded.narrow(0, world.rank() * shard, shard).clone();
  auto gathered = torch::zeros({shard * W}, torch::kFloat64);
  all_gather(g, gathered, mine).wait();
  expect(torch::equal(gathered.narrow(0, 0, numel), full), "all-gather of shards rebuilds the parameter");
  // Every rank's full gradient, reduce-scattered: my shard of their sum.
  auto grad = torch::zeros({shard * W}, torch::kFloat64);
  grad.narrow(0, 0, numel).copy_(rank_gradient(world.rank(), 99, {numel}));
  auto grad_shard = torch::zeros({shard}, torch::kFloat64);
  reduce_scatter(g, grad_shard, grad, ReduceOp::Sum).wait();
  auto sum = torch::zeros({shard * W}, torch::kFloat64);
  for (int r = 0; r < W; ++r) sum.narrow(0, 0, numel) += rank_gradient(r, 99, {numel});
  expect(torch::equal(grad_shard, sum.narrow(0, world.rank() * shard, shard)), "reduce-scatter gives my shard of the sum");
  remove_op_observer(&counter);

  std::lock_guard<std::mutex> lock(counter.mutex);
  expect(counter.counts["all_reduce"] == static_cast<int>(buckets.size()), "one all-reduce per bucket");
  expect(counter.counts["all_gather"] == 1 && counter.counts["reduce_scatter"] == 1, "one all-gather, one reduce-scatter");
  expect(counter.counts.size() == 3, "no other collectives");
  bucketed_gradient_sum(world);
}

// FSDP's unit in fp64: parameters of shapes that do not divide by the world size (and one with
// fewer rows than ranks, so some shards are empty) are rebuilt exactly by the all-gather; a
// forward, a reshard and a re-gather before backward give autograd the right weights (the
// freed-storage trick); the reduce-scatter gives each rank exactly its rows of the summed
// gradient; one all-gather per gather and one reduce-scatter per unit, nothing else.
void fsdp_unit(World& world) {
  using namespace ddx::train;
  Group& g = world.world();
  const int W = world.size(), rank = world.rank();
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"a", {7, 3}}, {"b", {5}}, {"c", {2, 3}}, {"d", {9, 2}}};
  UnitLayout layout = make_unit_layout("test", shapes, W);
  std::vector<torch::Tensor> params, full;
  {
    ddx::models::detail::SkeletonScope skeleton;
    for (size_t i = 0; i < shapes.size(); ++i) {
      params.push_back(ddx::models::detail::new_parameter(shapes[i].second, torch::kFloat64).requires_grad_(true));
      full.push_back(rank_gradient(11, static_cast<int>(i), shapes[i].second) * 0.25);
    }
  }
  FsdpPrecision fp64{torch::kFloat64, torch::kFloat64, torch::kFloat64};
  FsdpUnit unit(layout, params, rank, FsdpDevices{}, fp64);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShardedParameter& p = layout.parameters[i];
    unit.owned_rows(i).copy_(full[i].narrow(0, p.row_begin(rank), p.owned_rows(rank)));
  }
  OpCounter counter;
  add_op_observer(&counter);
  unit.begin_gather(g);
  unit.finish_gather();
  for (size_t i = 0; i < shapes.size(); ++i) expect(torch::equal(params[i].detach(), full[i]), "all-gather rebuilds " + shapes[i].first);

  // loss = sum_i sum(params_i * x_i) with x_i rank-dependent: d loss / d params_i = x_i.
  torch::Tensor loss = torch::zeros({}, torch::kFloat64);
  std::vector<torch::Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(rank_gradient(rank, static_cast<int>(i), shapes[i].second));
    loss = loss + (params[i] * params[i] * inputs.back()).sum();  // saves params[i] for backward
  }
  unit.reshard();
  expect(params[0].storage().nbytes() == 0, "reshard frees the unsharded storage");
  unit.begin_gather(g);
  unit.finish_gather();
  loss.backward();
  unit.begin_reduce_scatter(g);
  unit.finish_reduce_scatter();
  unit.reshard();
  std::vector<torch::Tensor> sums;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShardedParameter& p = layout.parameters[i];
    auto sum = torch::zeros(shapes[i].second, torch::kFloat64);
    for (int r = 0; r < W; ++r) sum += 2 * full[i] * rank_gradient(r, static_cast<int>(i), shapes[i].second);
    sums.push_back(sum);
    expect(!params[i].grad().defined(), "unsharded gradient dropped after the reduce-scatter");
    expect(torch::equal(unit.owned_grad_rows(i), sum.narrow(0, p.row_begin(rank), p.owned_rows(rank))),
           "reduce-scatter gives my rows of the summed gradient of " + shapes[i].first);
  }
  // Float64 storage comes back as float64, bit for bit; so do the summed gradients.
  auto everything = unit.gather_full(g, train::Held::Parameters);
  auto gradients = unit.gather_full(g, train::Held::Gradients);
  for (size_t i = 0; i < shapes.size(); ++i) {
    expect(torch::equal(everything[i], full[i]), "full gather of " + shapes[i].first);
    expect(torch::equal(gradients[i], sums[i]), "full gather of the summed gradient of " + shapes[i].first);
  }
  remove_op_observer(&counter);
  std::lock_guard<std::mutex> lock(counter.mutex);
  expect(counter.counts["all_gather"] == 4 && counter.counts["reduce_scatter"] == 1 && counter.counts.size() == 2,
         "two gathers + full gathers of parameters and gradients and one reduce-scatter, nothing else");
}

}  // namespace

int main(int argc, char** argv) {
  install_error_handlers();
  if (argc < 2) {
    std::fprintf(stderr, "usage: pg_worker mesh|records|timeout|shutdown-pending\n");
    return 2;
  }
  const std::string scenario = argv[1];
  RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  const int timeout_ms = scenario == "timeout" ? 2000 : 600000;
  auto world = World::init(info, options(timeout_ms));
  // The tests bound how long shutdown may take relative to it.
  std::printf("rank %d collective timeout %.1f s\n", info.rank, timeout_ms / 1e3);
  std::fflush(stdout);  // shutdown-pending leaves through _Exit, which flushes nothing
  if (scenario == "mesh") mesh(*world);
  else if (scenario == "records") records(*world);
  else if (scenario == "timeout") timeout(*world);
  else if (scenario == "shutdown-pending") shutdown_pending(*world);
  else if (scenario == "layer-parity") layer_parity(*world);
  else if (scenario == "fsdp-unit") fsdp_unit(*world);
  else throw std::runtime_error("unknown scenario " + scenario);
  world->shutdown();
  std::printf("PASS %s rank %d\n", scenario.c_str(), info.rank);
  return 0;
}
