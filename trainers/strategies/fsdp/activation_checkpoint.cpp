#include "strategies/fsdp/activation_checkpoint.h"

namespace ddx::train {
namespace {

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input, int64_t fn) {
    // Custom functions run their forward with grad mode off: no graph, no saved activations.
    ctx->save_for_backward({input});
    ctx->saved_data["fn"] = fn;
    return (*reinterpret_cast<const BlockFunction*>(fn))(input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor saved = ctx->get_saved_variables()[0];
    const auto* fn = reinterpret_cast<const BlockFunction*>(ctx->saved_data["fn"].toInt());
    torch::Tensor input = saved.detach().requires_grad_(true);
    torch::Tensor output;
    {
      torch::AutoGradMode enable(true);
      output = (*fn)(input);
    }
    torch::autograd::backward({output}, {grads[0]});
    return {input.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(const BlockFunction* fn, const torch::Tensor& input) {
  return Checkpoint::apply(input, reinterpret_cast<int64_t>(fn));
}

}  // namespace ddx::train
