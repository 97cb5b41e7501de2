// Level 2's compute and memory figures: the kernels of `ddx probe compute` and `ddx probe memory`
// (probes/node/), timed on each of this node's devices as those probes time them, and the
// host<->device copies of the memory probe per GPU.
#include <torch/cuda.h>

#include <algorithm>

#include "ddx/outliers.h"
#include "ddx/text/text.h"
#include "health/torch/active_parts.h"
#include "node/rank_probe.h"

namespace ddx::health {
namespace {

// Per array: STREAM wants 4x the last-level cache (an H100's L2 is 50 MB).
size_t memory_array_bytes(bool cuda) { return cuda ? size_t{256} << 20 : size_t{64} << 20; }

struct Figure {
  node::Metric metric;
  double value = 0;
};

// Each kernel once to warm up, then the best of a few short trials: on a shared node a trial can
// only be slowed by others, never sped up, so the best is the node's own figure (the node probes'
// rule, docs/thresholds.md).
std::vector<Figure> measure(const std::vector<node::Kernel>& kernels, const node::Placement& where) {
  const double trial_s = where.cuda ? 0.02 : 0.05;
  std::vector<Figure> figures;
  for (const node::Kernel& k : kernels) {
    k.run();
    if (where.cuda) torch::cuda::synchronize(where.device_index);
    std::vector<double> trials;
    for (int t = 0; t < kTrials; ++t) trials.push_back(node::time_trial(k, where, trial_s));
    figures.push_back({k.metric, *std::max_element(trials.begin(), trials.end())});
  }
  return figures;
}

// One row of figures: "fp32 n=256 0.031, fp32 n=512 0.040 TFLOP/s", each a judged Metric.
Check figure_row(const std::string& name, const std::vector<Figure>& figures, const std::string& metric,
                 const std::string& device, const std::string& label_key) {
  Check c;
  c.name = name;
  std::vector<std::string> parts;
  for (const Figure& f : figures) {
    parts.push_back(printf_text("%s %.3g", f.metric.label.c_str(), f.value));
    c.metrics.push_back({metric, f.value, {{"device", device}, {label_key, f.metric.key}}, true});
  }
  c.value = join(parts) + (figures.empty() ? "" : " " + figures.front().metric.unit);
  return c;
}

std::vector<Check> device_figures(const GemmDevice& device) {
  const node::Placement where = placement(device);
  std::vector<Check> rows;
  try {
    rows.push_back(figure_row("compute " + device.label, measure(node::compute_kernels(where, {}, {}), where),
                              "ddx_health_compute_tflops", device.label, "kernel"));
  } catch (const std::exception& e) {
    rows.push_back(failed_row("compute " + device.label, device, e.what()));
  }
  try {
    std::vector<Figure> stream, copies;
    for (const Figure& f : measure(node::memory_kernels(where, memory_array_bytes(where.cuda)), where)) {
      (f.metric.key == "host_to_device" || f.metric.key == "device_to_host" ? copies : stream).push_back(f);
    }
    rows.push_back(figure_row("memory " + device.label, stream, "ddx_health_memory_gbps", device.label, "kernel"));
    if (where.cuda) {
      rows.push_back(figure_row("host-device " + device.label, copies, "ddx_health_host_device_gbps", device.label,
                                "direction"));
    }
  } catch (const std::exception& e) {
    rows.push_back(failed_row("memory " + device.label, device, e.what()));
  }
  return rows;
}

}  // namespace

std::vector<Check> figure_checks(const std::vector<GemmDevice>& devices) {
  std::vector<Check> rows;
  bool any_gpu = false;
  for (const GemmDevice& device : devices) {
    any_gpu = any_gpu || device.device.is_cuda();
    const std::vector<Check> figures = device_figures(device);
    rows.insert(rows.end(), figures.begin(), figures.end());
  }
  if (!any_gpu) {
    Check c;
    c.name = "host-device";
    c.skipped = true;
    c.value = torch::cuda::is_available() ? "--device cpu: no GPU tested" : "no GPU: nothing to copy to";
    rows.push_back(c);
  }
  return rows;
}

}  // namespace ddx::health
