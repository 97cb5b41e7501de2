// The C++ models against an independent plain-PyTorch implementation
// (tests/python/reference_models.py, run with the Python of the same torch wheel): same
// weights through save_hf_weights/safetensors, same token batch; logits, loss and every
// parameter gradient must agree in fp32.
//
// Tolerance: |ours - ref| <= rtol * |ref| + atol, rtol = 1e-5 and atol = 1e-5 * max|ref| of
// that tensor, i.e. "1e-5 relative" with near-zero elements measured against the tensor's
// scale. The two sides compute the same math in different operation orders (fused SDPA vs an
// explicit masked softmax, fused LayerNorm vs its formula, x W^T vs x W for Conv1D, float32 vs
// float64 RoPE frequencies), so results differ by float32 rounding: observed worst case
// 1.8e-6 of the tensor's max (about 15 ulps) over logits and all gradients. Gradient entries
// that nearly cancel have no meaningful elementwise relative error (observed up to 1.5 on
// entries ~1e-8), hence the absolute floor tied to the tensor's own scale rather than a fixed
// number, so small-gradient tensors are held to the same relative standard as large ones.
// Architecture mistakes are far outside this: tiling instead of grouping KV heads, rotating
// RoPE the wrong way, dropping llama3's interpolated band, or GELU's 0.044715 changed to 0.0447
// each fail (checked by editing the reference once).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>

#include "../dist/process_helpers.h"
#include "models/causal_lm.h"
#include "models/hf_checkpoint.h"
#include "models/safetensors.h"
#include "models_test_util.h"

namespace ddx::models {
namespace {

using testutil::TempDir;

constexpr double kRtol = 1e-5;
constexpr double kAtolOfScale = 1e-5;

struct Comparison {
  double max_abs = 0, max_rel = 0, scale = 0, worst_excess = 0;  // excess > 0 fails
};

Comparison compare(const torch::Tensor& ours, const torch::Tensor& ref) {
  const torch::Tensor a = ours.detach().to(torch::kFloat64), b = ref.detach().to(torch::kFloat64);
  const double atol = kAtolOfScale * b.abs().max().item<double>();
  const torch::Tensor diff = (a - b).abs();
  Comparison c;
  c.max_abs = diff.max().item<double>();
  c.scale = b.abs().max().item<double>();
  c.max_rel = (diff / b.abs().clamp_min(1e-30)).max().item<double>();
  c.worst_excess = (diff - (kRtol * b.abs() + atol)).max().item<double>();
  return c;
}

void expect_close(const std::string& what, const torch::Tensor& ours, const torch::Tensor& ref) {
  ASSERT_EQ(ours.sizes(), ref.sizes()) << what;
  const Comparison c = compare(ours, ref);
  EXPECT_LE(c.worst_excess, 0.0) << what << ": max abs diff " << c.max_abs << " (" << c.max_abs / c.scale
                                 << " of max |ref| " << c.scale << "), max rel diff " << c.max_rel;
  if (std::getenv("DDX_VERBOSE_COMPARE"))
    std::printf("%-36s max|ref| %.3e  max abs diff %.3e  = %.2e of scale\n", what.c_str(), c.scale, c.max_abs,
                c.max_abs / c.scale);
}

// Runs the Python reference on `model_dir` and the batch; returns its output tensors.
std::map<std::string, torch::Tensor> run_reference(const std::string& dir, const std::string& model_dir,
                                                   const torch::Tensor& tokens, const torch::Tensor& labels) {
  const std::string inputs = dir + "/inputs.safetensors", out = dir + "/reference.safetensors";
  write_safetensors(inputs, {{"tokens", tokens}, {"labels", labels}});
  testing::ChildProcess python(
      {DDX_PYTHON, std::string(DDX_SOURCE_DIR) + "/tests/python/reference_models.py", "--model-dir", model_dir,
       "--inputs", inputs, "--out", out},
      {{"OMP_NUM_THREADS", "1"}}, dir + "/python.log");
  const auto status = python.wait(std::chrono::seconds(150));
  EXPECT_TRUE(status.has_value()) << "reference timed out:\n" << python.output();
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << python.output();
  std::map<std::string, torch::Tensor> result;
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) return result;
  for (const auto& [name, info] : read_safetensors_index(out)) result[name] = read_tensor(info);
  return result;
}

void check_against_reference(ModelConfig config) {
  TempDir dir;
  auto model = build_model(config, 2024);
  const std::string model_dir = dir.path() + "/model";
  save_hf_weights(*model, model_dir);

  torch::manual_seed(1);
  const int64_t batch = 2, seq = 17;
  const torch::Tensor tokens = torch::randint(config.vocab_size, {batch, seq}, torch::kInt64);
  torch::Tensor labels = tokens.roll(-1, 1);
  labels.select(1, seq - 1).fill_(-100);
  labels[0][3] = -100;
  labels[1][10] = -100;

  const torch::Tensor logits = model->forward(tokens);
  const LossSum loss_sum = causal_lm_loss_sum(logits, labels);
  ASSERT_EQ(loss_sum.tokens, batch * (seq - 1) - 2);
  const torch::Tensor loss = loss_sum.sum / static_cast<double>(loss_sum.tokens);
  loss.backward();

  const auto ref = run_reference(dir.path(), model_dir, tokens, labels);
  ASSERT_FALSE(ref.empty());
  expect_close("logits", logits, ref.at("logits"));
  expect_close("loss", loss, ref.at("loss"));
  expect_close("loss_sum", loss_sum.sum, ref.at("loss_sum"));
  size_t grads = 0;
  for (const auto& p : model->named_parameters()) {
    const HfTensorName hf = hf_name(config, p.key());
    const torch::Tensor grad = hf.transposed ? p.value().grad().t() : p.value().grad();
    ASSERT_TRUE(ref.count("grad." + hf.name)) << hf.name;
    expect_close("grad of " + p.key(), grad, ref.at("grad." + hf.name));
    ++grads;
  }
  EXPECT_EQ(grads + 3, ref.size()) << "the reference has gradients of weights the model lacks";
  // Sanity: the comparison is not vacuous; the logits spread over several units.
  EXPECT_GT(logits.std().item<double>(), 0.1);
}

// Larger init than training's 0.02, so attention is far from uniform and RoPE, masking and
// head grouping all move the logits by much more than the tolerance.
TEST(ModelReference, Gpt2MatchesPlainPyTorch) {
  ModelConfig config = model_config_from_preset("debug");
  config.init_std = 0.2;
  check_against_reference(config);
}

TEST(ModelReference, LlamaMatchesPlainPyTorch) {
  ModelConfig config = model_config_from_preset("debug-llama");
  config.init_std = 0.08;
  check_against_reference(config);
}

TEST(ModelReference, TiedLlamaMatchesPlainPyTorch) {
  ModelConfig config = model_config_from_preset("debug-llama");
  config.init_std = 0.08;
  config.tie_embeddings = true;
  config.rope_scaling = RopeScaling{};  // plain RoPE as well
  check_against_reference(config);
}

}  // namespace
}  // namespace ddx::models
