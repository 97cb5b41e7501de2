// Level 2's known-answer GEMMs: every dtype on every device, each product compared element by
// element with the exact answer (known_answer_gemm.h), and its rate.
#include <ATen/Version.h>

#include <algorithm>
#include <vector>

#include "ddx/outliers.h"
#include "ddx/text/text.h"
#include "health/torch/active_parts.h"
#include "node/rank_probe.h"

namespace ddx::health {
node::Placement placement(const GemmDevice& d) {
  return {d.device.is_cuda(), d.device.is_cuda() ? static_cast<int>(d.device.index()) : 0};
}

namespace {

// The rate of `gemm`: the best of a few short trials (ddx probe compute's timing and rule: a
// trial on a shared node can only be slowed by others).
double best_tflops(PlacedGemm& gemm) {
  node::Kernel k;
  k.work = gemm.flops();
  k.scale = 1e12;
  k.run = [&gemm]() { gemm.run(); };
  const double trial_s = gemm.device().device.is_cuda() ? 0.02 : 0.05;
  std::vector<double> trials;
  for (int t = 0; t < kTrials; ++t) trials.push_back(node::time_trial(k, placement(gemm.device()), trial_s));
  return *std::max_element(trials.begin(), trials.end());
}

Check gemm_check(const GemmDevice& device, const KnownAnswer& answer) {
  Check c;
  c.name = "gemm " + device.label + " " + answer.dtype;
  const std::string shape = printf_text("%lldx%lldx%lld", static_cast<long long>(answer.m),
                                        static_cast<long long>(answer.k), static_cast<long long>(answer.n));
  try {
    PlacedGemm gemm(answer, device);
    gemm.run();
    gemm.synchronize();
    const Comparison cold = gemm.compare_on_host();  // the first product, on an idle device
    const double tflops = best_tflops(gemm);
    const Comparison hot = gemm.compare_on_host();   // the last of the timed ones
    const Comparison& shown = cold.wrong > 0 ? cold : hot;
    if (shown.wrong > 0) {
      c.state = State::Critical;
      c.value = describe(shown) + " (" + shape + " " + answer.dtype + " on " + device.label + ")";
      c.reason = c.name + " wrong element";
      c.remediation = device.device.is_cuda()
                          ? "silent data corruption: drain the node, reset the GPU (nvidia-smi -r) and run ddx health "
                            "--level 3; replace the GPU (RMA) if it returns"
                          : "silent data corruption: drain the node; if it returns under ATEN_CPU_CAPABILITY=default too, "
                            "the CPU computes wrong (have the vendor test it)";
      return c;
    }
    // Which of ATen's CPU kernels gave it (ATEN_CPU_CAPABILITY picks them): each can be wrong alone.
    const std::string kernels = device.device.is_cuda() ? "" : ", ATen " + at::get_cpu_capability();
    c.value = printf_text("%s, %.3f TFLOP/s (%s%s)", describe(shown).c_str(), tflops, shape.c_str(), kernels.c_str());
    c.metrics.push_back({"ddx_health_gemm_tflops", tflops, {{"device", device.label}, {"dtype", answer.dtype}}, true});
  } catch (const std::exception& e) {
    return failed_row(c.name, device, e.what());
  }
  return c;
}

}  // namespace

const KnownAnswer& KnownAnswers::get(const std::string& dtype, int64_t size) {
  const auto key = std::make_pair(dtype, size);
  auto it = answers_.find(key);
  if (it == answers_.end()) it = answers_.emplace(key, make_known_answer(dtype, size)).first;
  return it->second;
}

Check failed_row(const std::string& name, const GemmDevice& device, const std::string& what) {
  Check c;
  c.name = name;
  const std::string first_line = what.substr(0, what.find('\n'));
  if (device.device.is_cuda()) {
    c.state = State::Critical;
    c.value = device.label + " failed: " + first_line;
    c.reason = device.label + " kernel failed";
    c.remediation = "look for XIDs (level 1) and reset the GPU (nvidia-smi -r); drain the node if it returns";
  } else {
    c.state = State::Unknown;
    c.value = "ddx could not run it: " + first_line;
    c.remediation = "rerun ddx health; report it with this line if it returns";
  }
  return c;
}

std::vector<Check> gemm_checks(const std::vector<GemmDevice>& devices, KnownAnswers& answers) {
  std::vector<Check> rows;
  for (const GemmDevice& device : devices) {
    for (const std::string& dtype : gemm_dtypes(device)) rows.push_back(gemm_check(device, answers.get(dtype, gemm_size(device))));
  }
  return rows;
}

}  // namespace ddx::health
