// Level 3's burn-in: every device repeats its known-answer GEMMs, all devices at once, for the
// time asked. Every product is checked on the device (its wrong elements counted without
// waiting, so the device stays loaded), and the last product of every quarter second is also
// compared element by element on the host, which names the element. Meanwhile the devices'
// throttling and errors are watched (throttle_watch.h).
#include <torch/cuda.h>

#ifdef DDX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "ddx/text/text.h"
#include "health/throttle_watch.h"
#include "health/torch/active_parts.h"

namespace ddx::health {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kBatchSeconds = 0.25;  // products between two waits on the device
constexpr double kProgressSeconds = 10;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What one dtype's products on one device came to.
struct Tally {
  int64_t products = 0;
  int64_t wrong_on_device = 0;  // elements, over every product
  int64_t wrong_on_host = 0;    // elements, over the products compared on the host
  std::string first_wrong;      // the first element named on the host
};

// One device's burn-in, written by its thread, read by the progress line.
struct DeviceBurn {
  GemmDevice device;
  std::mutex mutex;
  std::map<std::string, Tally> tallies;  // by dtype
  double flops = 0;
  std::string error;  // what stopped it early

  int64_t products() {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t n = 0;
    for (const auto& [dtype, t] : tallies) n += t.products;
    return n;
  }
  int64_t wrong() {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t n = 0;
    for (const auto& [dtype, t] : tallies) n += t.wrong_on_device + t.wrong_on_host;
    return n;
  }
};

// Products of `gemm` for about kBatchSeconds (never past the deadline), each checked on the
// device; then the last one compared on the host.
void run_batch(PlacedGemm& gemm, torch::Tensor& counter, Clock::time_point deadline, DeviceBurn& burn) {
  const auto start = Clock::now();
  int64_t products = 0;
  do {
    for (int i = 0; i < 4; ++i) {  // a few products queued between looks at the clock
      gemm.run();
      gemm.count_wrong_on_device(counter);
      ++products;
    }
    gemm.synchronize();
  } while (seconds_between(start, Clock::now()) < kBatchSeconds && Clock::now() < deadline);
  const int64_t wrong_so_far = counter.item<int64_t>();
  const Comparison host = gemm.compare_on_host();
  std::lock_guard<std::mutex> lock(burn.mutex);
  Tally& t = burn.tallies[gemm.answer().dtype];
  t.products += products;
  t.wrong_on_device = wrong_so_far;
  t.wrong_on_host += host.wrong;
  if (host.wrong > 0 && t.first_wrong.empty()) t.first_wrong = describe(host);
  burn.flops += gemm.flops() * static_cast<double>(products);
}

void burn(DeviceBurn& burn, KnownAnswers& answers, std::mutex& answers_mutex, Clock::time_point deadline) {
  try {
    std::vector<std::unique_ptr<PlacedGemm>> gemms;
    std::vector<torch::Tensor> counters;
    for (const std::string& dtype : gemm_dtypes(burn.device)) {
      std::lock_guard<std::mutex> lock(answers_mutex);
      gemms.push_back(std::make_unique<PlacedGemm>(answers.get(dtype, gemm_size(burn.device)), burn.device));
      counters.push_back(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(burn.device.device)));
    }
    while (Clock::now() < deadline) {
      for (size_t i = 0; i < gemms.size() && Clock::now() < deadline; ++i) run_batch(*gemms[i], counters[i], deadline, burn);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(burn.mutex);
    burn.error = e.what();
  }
}

std::string progress_line(double elapsed, double seconds, std::vector<std::unique_ptr<DeviceBurn>>& burns) {
  std::vector<std::string> parts;
  for (auto& b : burns) {
    const int64_t wrong = b->wrong();
    double flops = 0;
    {
      std::lock_guard<std::mutex> lock(b->mutex);
      flops = b->flops;
    }
    parts.push_back(printf_text("%s %lld products, %s, %.3g TFLOP/s", b->device.label.c_str(),
                                static_cast<long long>(b->products()),
                                wrong == 0 ? "all exact" : printf_text("%lld wrong elements", static_cast<long long>(wrong)).c_str(),
                                flops / elapsed / 1e12));
  }
  return printf_text("ddx health: burn-in %.0f of %.0f s: ", elapsed, seconds) + join(parts, "; ");
}

Check burn_row(DeviceBurn& b, double elapsed) {
  Check c;
  c.name = "burn-in " + b.device.label;
  std::lock_guard<std::mutex> lock(b.mutex);
  if (!b.error.empty()) return failed_row(c.name, b.device, b.error);
  int64_t products = 0;
  std::vector<std::string> dtypes, wrong;
  for (const auto& [dtype, t] : b.tallies) {
    products += t.products;
    dtypes.push_back(dtype);
    if (t.wrong_on_device + t.wrong_on_host == 0) continue;
    std::string what = printf_text("%s %lld wrong elements in %lld products", dtype.c_str(),
                                   static_cast<long long>(std::max(t.wrong_on_device, t.wrong_on_host)),
                                   static_cast<long long>(t.products));
    what += t.first_wrong.empty() ? " (counted on the device; no product compared on the host was wrong)" : ", " + t.first_wrong;
    wrong.push_back(what);
    if (c.reason.empty()) c.reason = "burn-in " + b.device.label + " " + dtype + " wrong element";
  }
  const double tflops = b.flops / elapsed / 1e12;
  if (!wrong.empty()) {
    c.state = State::Critical;
    c.value = "under load: " + join(wrong, "; ");
    c.remediation = b.device.device.is_cuda()
                        ? "silent data corruption under load: drain the node, reset the GPU and repeat; replace it (RMA) if it returns"
                        : "silent data corruption under load: drain the node and have the CPU and memory tested";
    return c;
  }
  c.value = printf_text("%lld products (%s) in %.0f s, every element exact, %.3g TFLOP/s sustained",
                        static_cast<long long>(products), join(dtypes, ", ").c_str(), elapsed, tflops);
  c.metrics.push_back({"ddx_health_burnin_tflops", tflops, {{"device", b.device.label}}, true});
  c.metrics.push_back({"ddx_health_burnin_products", static_cast<double>(products), {{"device", b.device.label}}, false});
  return c;
}

// The PCI bus id CUDA gives device `index`, for NVML to find it ("0000:3b:00.0").
std::string cuda_bus_id(int index) {
#ifdef DDX_WITH_CUDA
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  return printf_text("%04x:%02x:%02x.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
#else
  (void)index;
  return "";
#endif
}

}  // namespace

std::vector<Check> burn_in_checks(const std::vector<GemmDevice>& devices, KnownAnswers& answers, double seconds) {
  std::vector<std::pair<std::string, std::string>> gpus;
  for (const GemmDevice& d : devices) {
    if (d.device.is_cuda()) gpus.emplace_back(d.label, cuda_bus_id(d.device.index()));
  }
  std::unique_ptr<GpuWatch> gpu_watch = gpus.empty() ? nullptr : std::make_unique<GpuWatch>(gpus);
  const CpuThrottleCounts cpu_before = gpus.empty() ? read_cpu_throttle_counts() : CpuThrottleCounts{};

  std::vector<std::unique_ptr<DeviceBurn>> burns;
  for (const GemmDevice& d : devices) {
    burns.push_back(std::make_unique<DeviceBurn>());
    burns.back()->device = d;
  }
  std::mutex answers_mutex;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  std::vector<std::thread> threads;
  for (auto& b : burns) threads.emplace_back([&, device = b.get()]() { burn(*device, answers, answers_mutex, deadline); });
  // Watch while they run: NVML every second, a progress line every ~10 s.
  auto next_progress = start + std::chrono::seconds(static_cast<int64_t>(kProgressSeconds));
  while (Clock::now() < deadline) {
    std::this_thread::sleep_until(std::min(deadline, Clock::now() + std::chrono::seconds(1)));
    if (gpu_watch) gpu_watch->sample();
    if (Clock::now() >= next_progress) {
      std::fprintf(stderr, "%s\n", progress_line(seconds_between(start, Clock::now()), seconds, burns).c_str());
      next_progress += std::chrono::seconds(static_cast<int64_t>(kProgressSeconds));
    }
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = seconds_between(start, Clock::now());
  std::fprintf(stderr, "%s\n", progress_line(elapsed, seconds, burns).c_str());

  std::vector<Check> rows;
  for (auto& b : burns) rows.push_back(burn_row(*b, elapsed));
  if (gpu_watch) {
    const std::vector<Check> watched = gpu_watch->finish();
    rows.insert(rows.end(), watched.begin(), watched.end());
  } else {
    rows.push_back(judge_cpu_throttle(cpu_before, read_cpu_throttle_counts()));
  }
  return rows;
}

}  // namespace ddx::health
