// Tensor-parallel layers against the unsharded layers, in fp64, on every rank of a TP group of
// the launched world size (2, 3 or 4), under ddx launch. Prints "PASS tp-layers rank R" and
// exits 0, or throws (exit via the error handlers). Checked, for GPT-2 and Llama (GQA), without
// and with sequence parallelism:
//  - one transformer block: output, input gradient and every weight gradient (each rank's
//    slice of the unsharded gradient), and the collectives it issues: without SP 2 all-reduces
//    in forward and 2 in backward; with SP 2 all-gathers + 2 reduce-scatters each way;
//  - the whole model (vocab-parallel embedding, tied or untied vocab-parallel head and loss on
//    an uneven vocabulary of 1001): loss and every gradient;
//  - the vocab-parallel loss alone: 2 all-reduces in forward, none in backward.
// The unsharded model is built from the same seed; TP ranks build only their slices, so the
// comparison also checks the layout-independent init of every slice (bit-identical).
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "ddx/collectives.h"
#include "ddx/errors/error_report.h"
#include "ddx/text/log.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "models/causal_lm.h"
#include "models/model_config.h"
#include "models/parallel_layers.h"
#include "worker_checks.h"

using namespace ddx;
using namespace ddx::models;
using ddx::testing::expect;
using ddx::testing::OpCounter;

namespace {

// This rank's slices of a full tensor, as its sharded parameter holds them.
torch::Tensor slice_of(const torch::Tensor& full, const ParameterShard& shard) {
  std::vector<torch::Tensor> parts;
  for (const Range& r : shard.ranges) parts.push_back(full.narrow(shard.dim, r.begin, r.size()));
  return torch::cat(parts, shard.dim);
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  expect(got.sizes() == want.sizes(), what + ": shape " + c10::str(got.sizes()) + " vs " + c10::str(want.sizes()));
  const double diff = (got - want).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  expect(diff <= 1e-10 * scale, what + ": max difference " + std::to_string(diff));
}

// Every parameter of `tp_model` against the unsharded model: values (the init) and gradients.
// Replicated gradients are summed over the group first under SP, as TpStrategy does.
void expect_same_parameters(CausalLM& tp_model, CausalLM& full_model, Group& group, bool sp, bool grads,
                            const std::string& what) {
  const ParameterShards shards = parameter_shards(tp_model);
  auto full = full_model.named_parameters();
  for (const auto& item : tp_model.named_parameters()) {
    const std::string& name = item.key();
    auto shard = shards.find(name);
    auto pick = [&](const torch::Tensor& t) { return shard != shards.end() ? slice_of(t, shard->second) : t; };
    if (!grads) {
      expect(torch::equal(item.value(), pick(full[name])), what + ": init of " + name + " is not the unsharded slice");
      continue;
    }
    expect(item.value().grad().defined() == full[name].grad().defined(), what + ": gradient presence of " + name);
    if (!item.value().grad().defined()) continue;
    torch::Tensor g = item.value().grad().clone();
    if (sp && shard == shards.end()) all_reduce(group, g).wait();
    expect_close(g, pick(full[name].grad()), what + ": gradient of " + name);
  }
}

void expect_counts(std::map<std::string, int> got, std::map<std::string, int> want, const std::string& what) {
  std::string text;
  for (const auto& [op, n] : got) text += " " + op + "=" + std::to_string(n);
  expect(got == want, what + ": collectives" + text);
}

ModelConfig test_config(Family family, int tp) {
  // Head counts every TP size of the test divides (query 12; KV 6 at 2 and 3, 4 at 4 ranks:
  // whole GQA groups of 2, 3 per rank), vocab 1001 and MLP 137, which none divides.
  ModelConfig c = model_config_from_preset(family == Family::Gpt2 ? "debug-tp" : "debug-tp-llama");
  c.num_heads = 12;
  c.hidden_size = family == Family::Gpt2 ? 48 : 96;
  c.num_kv_heads = family == Family::Gpt2 ? 12 : (tp == 4 ? 4 : 6);
  return c;
}

void check_model(World& world, Family family, bool sp) {
  Group& group = world.world();
  const int n = world.size();
  const ModelConfig config = test_config(family, n);
  const std::string what = std::string(to_string(family)) + (sp ? " sp" : "") + " x" + std::to_string(n);
  auto full = build_model(config, 11, torch::kCPU, torch::kFloat64);
  auto tp = build_model(config, 11, torch::kCPU, torch::kFloat64, TensorParallel{&group, sp});
  expect_same_parameters(*tp, *full, group, sp, false, what);

  const int64_t B = 2, T = 12;  // T splits over 2, 3 and 4 sequence-parallel ranks
  torch::manual_seed(5);  // same batch on every rank
  torch::Tensor tokens = torch::randint(config.vocab_size, {B, T}, torch::kInt64);
  torch::Tensor labels = torch::randint(config.vocab_size, {B, T}, torch::kInt64);
  labels.index_put_({0, torch::indexing::Slice(0, 3)}, -100);
  torch::Tensor hidden = torch::randn({B, T, config.hidden_size}, torch::kFloat64);
  torch::Tensor out_grad = torch::randn({B, T, config.hidden_size}, torch::kFloat64);
  const Range seq = sequence_range(T, TensorParallel{&group, sp});

  // One block: forward, input gradient, weight gradients, and its collectives.
  OpCounter counter;
  add_op_observer(&counter);
  torch::Tensor x_full = hidden.clone().requires_grad_(true);
  torch::Tensor y_full = full->block(0, x_full);
  (y_full * out_grad).sum().backward();
  counter.take();
  torch::Tensor x = hidden.narrow(1, seq.begin, seq.size()).clone().requires_grad_(true);
  torch::Tensor y = tp->block(0, x);
  auto forward_ops = counter.take();
  (y * out_grad.narrow(1, seq.begin, seq.size())).sum().backward();
  auto backward_ops = counter.take();
  expect_close(y, y_full.narrow(1, seq.begin, seq.size()), what + ": block output");
  expect_close(x.grad(), x_full.grad().narrow(1, seq.begin, seq.size()), what + ": block input gradient");
  if (sp) {
    expect_counts(forward_ops, {{"all_gather", 2}, {"reduce_scatter", 2}}, what + " block forward");
    expect_counts(backward_ops, {{"all_gather", 2}, {"reduce_scatter", 2}}, what + " block backward");
  } else {
    expect_counts(forward_ops, {{"all_reduce", 2}}, what + " block forward");
    expect_counts(backward_ops, {{"all_reduce", 2}}, what + " block backward");
  }
  // Only block 0 ran: its weight gradients (the others have none on either side).
  expect_same_parameters(*tp, *full, group, sp, true, what + " block 0");
  full->zero_grad();
  tp->zero_grad();

  // The whole model and the vocab-parallel loss.
  LossSum want = full->loss_sum(full->forward(tokens), labels);
  want.sum.backward();
  LossSum got = tp->loss_sum(tp->forward(tokens), labels);
  got.sum.backward();
  expect(got.tokens == want.tokens, what + ": token count");
  expect_close(got.sum, want.sum, what + ": loss");
  expect_same_parameters(*tp, *full, group, sp, true, what + " model");
  remove_op_observer(&counter);
}

// The loss alone on random fp64 logits over an uneven vocabulary, ignored labels included.
void check_vocab_parallel_loss(World& world) {
  Group& group = world.world();
  const int64_t vocab = 1001, M = 37;
  torch::manual_seed(9);
  torch::Tensor logits = torch::randn({1, M, vocab}, torch::kFloat64) * 3;
  torch::Tensor labels = torch::randint(vocab, {1, M}, torch::kInt64);
  labels.index_put_({0, torch::indexing::Slice(0, 5)}, -100);
  labels[0][5] = vocab - 1;  // the last row of the short last shard
  torch::Tensor full = logits.clone().requires_grad_(true);
  LossSum want = causal_lm_loss_sum(full, labels);
  want.sum.backward();

  const TensorParallel tp{&group, false};
  const Range mine = shard_range(vocab, tp.size(), tp.rank(), "a vocabulary");
  torch::Tensor local = logits.narrow(-1, mine.begin, mine.size()).clone().requires_grad_(true);
  OpCounter counter;
  add_op_observer(&counter);
  LossSum got = vocab_parallel_loss_sum(local, labels, mine, tp);
  auto forward_ops = counter.take();
  got.sum.backward();
  auto backward_ops = counter.take();
  remove_op_observer(&counter);
  expect_close(got.sum, want.sum, "vocab-parallel loss");
  expect(got.tokens == want.tokens, "vocab-parallel token count");
  expect_close(local.grad(), full.grad().narrow(-1, mine.begin, mine.size()), "vocab-parallel logit gradient");
  expect_counts(forward_ops, {{"all_reduce", 2}}, "vocab-parallel loss forward");
  expect_counts(backward_ops, {}, "vocab-parallel loss backward");
}

}  // namespace

int main(int argc, char** argv) {
  install_error_handlers();
  RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  ProcessGroupOptions options;
  options.collective_timeout = std::chrono::seconds(120);
  options.store_timeout = std::chrono::seconds(30);
  options.enable_nccl = false;
  auto world = World::init(info, options);
  check_vocab_parallel_loss(*world);
  for (Family family : {Family::Gpt2, Family::Llama}) {
    for (bool sp : {false, true}) check_model(*world, family, sp);
  }
  world->shutdown();
  std::printf("PASS tp-layers rank %d\n", info.rank);
  return 0;
}
