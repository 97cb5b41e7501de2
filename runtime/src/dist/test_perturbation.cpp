#include "ddx/test_perturbation.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "ddx/collectives.h"
#include "ddx/env.h"
#include "ddx/errors.h"
#include "ddx/log.h"

namespace ddx {
namespace {

struct Perturbation {
  std::string kind;  // corrupt | delay
  std::string op;
  int rank = -1;
  int delay_ms = 0;
};

bool matches(const std::string& op, const OpRecord& r) { return op == "*" || op == to_string(r.op); }

class PerturbationHook : public CollectiveHook {
 public:
  explicit PerturbationHook(std::vector<Perturbation> items) : items_(std::move(items)) {}

  void before_launch(OpRecord& record, std::vector<at::Tensor>&) override {
    for (const auto& p : items_) {
      if (p.kind == "delay" && matches(p.op, record)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
      }
    }
  }
  void after_wait(const OpRecord& record, std::vector<at::Tensor>& outputs) override {
    for (const auto& p : items_) {
      if (p.kind == "corrupt" && matches(p.op, record) && !outputs.empty() && outputs[0].numel() > 0) {
        outputs[0].view({-1})[0].add_(1);
      }
    }
  }

 private:
  std::vector<Perturbation> items_;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

void install_test_perturbations(int global_rank) {
  const char* spec = std::getenv("DDX_TEST_PERTURB");
  if (!spec || !*spec) return;
  std::vector<Perturbation> mine;
  for (const std::string& item : split(spec, ';')) {
    auto parts = split(item, ':');
    const bool ok = (parts.size() == 3 && parts[0] == "corrupt") ||
                    (parts.size() == 4 && parts[0] == "delay");
    if (!ok) {
      throw UsageError("DDX_TEST_PERTURB item '" + item +
                       "' is not corrupt:<op>:<rank> or delay:<op>:<rank>:<ms>");
    }
    Perturbation p;
    p.kind = parts[0];
    p.op = parts[1];
    p.rank = static_cast<int>(parse_int("DDX_TEST_PERTURB rank", parts[2], 0, 1 << 20));
    if (p.kind == "delay") p.delay_ms = static_cast<int>(parse_int("DDX_TEST_PERTURB delay", parts[3], 0, 3600000));
    if (p.rank == global_rank) mine.push_back(p);
  }
  if (mine.empty()) return;
  log::warn("DDX_TEST_PERTURB is set: this rank's collectives are deliberately perturbed (", spec, ")");
  // Lives for the whole process, like the collective layer's hook list.
  static auto* hook = new PerturbationHook(std::move(mine));
  add_collective_hook(hook);
}

}  // namespace ddx
