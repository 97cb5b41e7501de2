#include "faults/dist/parameter_faults.h"

#include <ATen/ATen.h>

#include "faults/faults.h"

namespace ddx::faults {

void inject_parameter_faults(const std::vector<std::pair<std::string, at::Tensor>>& parameters) {
  const FaultSpec* s = find_now("bitflip");
  if (!s) return;
  if (parameters.empty()) s->fail("this strategy exposes no parameters to flip (single, ddp, tp, fsdp and 2d do)");
  const std::string wanted = s->text_param("param", parameters.front().first);
  for (const auto& [name, p] : parameters) {
    if (name != wanted) continue;
    const int64_t bit = s->int_param("bit", 22, 0, 63);
    if (bit >= 8 * static_cast<int64_t>(p.element_size())) {
      s->fail("bit " + std::to_string(bit) + " is past the " + std::to_string(8 * p.element_size()) + "-bit elements of " + name);
    }
    log_firing(*s, "flipping bit " + std::to_string(bit) + " of " + name + "[0]");
    // Element 0 of the rank's live parameter (a view), edited through a host copy so that the
    // same code flips a bit on the CPU and on a GPU.
    at::Tensor first = p.detach().view({-1}).narrow(0, 0, 1);
    at::Tensor host = first.to(at::kCPU).clone();
    static_cast<uint8_t*>(host.data_ptr())[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));  // little-endian
    first.copy_(host);
    return;
  }
  s->fail("param '" + wanted + "' is not a parameter of this rank");
}

}  // namespace ddx::faults
