// The parts of `ddx train`'s step on the debug model, timed apart: forward, loss, backward and
// the AdamW update, and the whole step. A regression guard, not a test: ci/test.sh prints the
// numbers into the log of every commit and nothing asserts on them (docs/performance.md).
// One intra-op thread, so the numbers move with the code rather than with the machine's load.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "models/causal_lm.h"
#include "optim/adamw.h"

namespace {

using ddx::models::CausalLM;

// The debug model and one batch of 4 x 64 tokens, as `ddx train -m debug -b 4 -s 64` would see.
struct Step {
  Step() {
    torch::manual_seed(0);
    model = ddx::models::build_model(ddx::models::resolve_model_config("debug"), /*seed=*/0);
    inputs = torch::randint(0, model->config().vocab_size, {4, 64}, torch::kInt64);
    labels = torch::randint(0, model->config().vocab_size, {4, 64}, torch::kInt64);
    for (auto& item : model->named_parameters()) parameters.emplace_back(item.key(), item.value());
  }
  torch::Tensor forward() { return model->forward(inputs); }
  torch::Tensor loss(const torch::Tensor& logits) {
    return model->loss_sum(logits, labels).sum * (1.0 / static_cast<double>(labels.numel()));
  }
  void update() {
    for (auto& [name, p] : parameters) {
      torch::Tensor param = p.detach();
      optimizer.update(name, param, p.grad(), 1e-3);
    }
  }
  std::shared_ptr<CausalLM> model;
  torch::Tensor inputs, labels;
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
  ddx::train::AdamW optimizer{ddx::train::AdamWConfig{}};
};

Step& step() {
  static Step s;
  return s;
}

void BM_Forward(benchmark::State& state) {
  for (auto _ : state) {
    torch::Tensor logits = step().forward();
    benchmark::DoNotOptimize(logits.data_ptr());
  }
}

void BM_Loss(benchmark::State& state) {
  torch::Tensor logits = step().forward().detach().requires_grad_(true);
  for (auto _ : state) {
    torch::Tensor loss = step().loss(logits);
    benchmark::DoNotOptimize(loss.data_ptr());
  }
}

void BM_Backward(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    torch::Tensor loss = step().loss(step().forward());
    state.ResumeTiming();
    loss.backward();
  }
  for (auto& [name, p] : step().parameters) p.mutable_grad() = torch::Tensor();
}

void BM_Optimizer(benchmark::State& state) {
  step().loss(step().forward()).backward();
  for (auto _ : state) step().update();
  for (auto& [name, p] : step().parameters) p.mutable_grad() = torch::Tensor();
}

void BM_Step(benchmark::State& state) {
  for (auto _ : state) {
    step().loss(step().forward()).backward();
    step().update();
    for (auto& [name, p] : step().parameters) p.mutable_grad() = torch::Tensor();
  }
}

BENCHMARK(BM_Forward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Loss)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Backward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Optimizer)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
