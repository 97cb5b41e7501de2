#include "checkpoint/state_files.h"

#include <set>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "models/safetensors.h"

namespace ddx::train {
namespace {

torch::Tensor to_cpu_contiguous(const torch::Tensor& t) { return t.detach().to(torch::kCPU).contiguous(); }


}  // namespace

void write_model_file(const std::string& path, const NamedTensors& parameters) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, t] : parameters) out.emplace_back(name, to_cpu_contiguous(t));
  models::write_safetensors(path, out, {{"format", "ddx-model"}});
}

void write_optimizer_file(const std::string& path, const std::map<std::string, AdamWState>& state) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, s] : state) {
    out.emplace_back(name + ".exp_avg", to_cpu_contiguous(s.exp_avg));
    out.emplace_back(name + ".exp_avg_sq", to_cpu_contiguous(s.exp_avg_sq));
    out.emplace_back(name + ".step", torch::tensor({s.step}, torch::kInt64));
  }
  models::write_safetensors(path, out, {{"format", "ddx-adamw"}});
}

void read_model_file(const std::string& path, NamedTensors& parameters) {
  auto index = models::read_safetensors_index(path);
  std::set<std::string> expected;
  for (auto& [name, t] : parameters) {
    expected.insert(name);
    auto it = index.find(name);
    if (it == index.end()) throw UsageError("checkpoint " + path + " has no tensor " + name);
    if (it->second.shape != t.sizes().vec()) {
      throw UsageError("checkpoint " + path + ": tensor " + name + " has shape " +
                       shape_text(it->second.shape) + ", the model needs " + shape_text(t.sizes().vec()));
    }
  }
  for (const auto& [name, info] : index) {
    if (!expected.count(name)) throw UsageError("checkpoint " + path + " has unexpected tensor " + name);
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : parameters) t.copy_(models::read_tensor(index.at(name)));
}

std::map<std::string, AdamWState> read_optimizer_file(const std::string& path, const NamedTensors& like,
                                                       torch::Device device) {
  auto index = models::read_safetensors_index(path);
  std::map<std::string, AdamWState> state;
  for (const auto& [name, t] : like) {
    auto a = index.find(name + ".exp_avg");
    auto b = index.find(name + ".exp_avg_sq");
    auto c = index.find(name + ".step");
    if (a == index.end() && b == index.end() && c == index.end()) continue;  // never updated
    if (a == index.end() || b == index.end() || c == index.end()) {
      throw UsageError("checkpoint " + path + ": optimizer state of " + name + " is incomplete");
    }
    if (a->second.shape != t.sizes().vec() || b->second.shape != t.sizes().vec()) {
      throw UsageError("checkpoint " + path + ": optimizer state of " + name + " has shape " +
                       shape_text(a->second.shape) + ", the model needs " + shape_text(t.sizes().vec()));
    }
    AdamWState s;
    s.exp_avg = models::read_tensor(a->second).to(device, t.scalar_type());
    s.exp_avg_sq = models::read_tensor(b->second).to(device, t.scalar_type());
    s.step = models::read_tensor(c->second).item<int64_t>();
    state[name] = std::move(s);
  }
  if (state.size() * 3 != index.size()) {
    throw UsageError("checkpoint " + path + " holds optimizer state for parameters the model does not have");
  }
  return state;
}

}  // namespace ddx::train
