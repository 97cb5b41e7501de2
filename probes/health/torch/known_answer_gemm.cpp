#include "health/torch/known_answer_gemm.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <stdexcept>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "faults/faults.h"

namespace ddx::health {
namespace {

constexpr int64_t kInner = 1024;  // k
constexpr int64_t kPeriod = 509;  // rows of A and columns of B repeat with it (a prime)

// What the inputs of one dtype may hold (the bounds of known_answer_gemm.h).
struct InputRule {
  int64_t a_max, b_max;
  int64_t every;        // a(i, k) may be non-zero only where (i + k) % every == 0: k / every per row
  int input_bits;       // significant bits of the input format
  int output_bits;      // of the output (and the least of any accumulator)
};

InputRule rule_for(const std::string& dtype) {
  if (dtype == "fp64") return {64, 64, 1, 53, 53};
  if (dtype == "fp32") return {64, 64, 1, 24, 24};
  if (dtype == "tf32") return {64, 64, 1, 11, 24};
  if (dtype == "fp16") return {2, 2, 2, 11, 11};
  if (dtype == "bf16") return {1, 1, 4, 8, 8};
  throw std::logic_error("known-answer GEMM: no input rule for dtype " + dtype);
}

// The exactness argument, checked: a rule that breaks it is a bug here, not a node's fault.
void check_exact(const std::string& dtype, const InputRule& r, int64_t k) {
  const int64_t bound = (k / r.every) * r.a_max * r.b_max;
  if (r.a_max > (int64_t{1} << r.input_bits) || r.b_max > (int64_t{1} << r.input_bits) ||
      bound > (int64_t{1} << r.output_bits)) {
    throw std::logic_error("known-answer GEMM " + dtype + ": partial sums up to " + std::to_string(bound) +
                           " are not exact in " + std::to_string(r.output_bits) + " bits");
  }
}

// SplitMix64: the same integers on every machine and every run.
class FixedSequence {
 public:
  explicit FixedSequence(uint64_t seed) : state_(seed) {}
  int64_t uniform(int64_t max_abs) {  // in [-max_abs, max_abs]
    return static_cast<int64_t>(next() % static_cast<uint64_t>(2 * max_abs + 1)) - max_abs;
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// want = a0 b0, period x period, in int64 (rows in parallel).
std::vector<int64_t> exact_product(const std::vector<int64_t>& a0, const std::vector<int64_t>& b0, int64_t p, int64_t k) {
  std::vector<int64_t> want(static_cast<size_t>(p * p), 0);
  at::parallel_for(0, p, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t* row = &want[static_cast<size_t>(i * p)];
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t a = a0[static_cast<size_t>(i * k + kk)];
        if (a == 0) continue;
        const int64_t* b = &b0[static_cast<size_t>(kk * p)];
        for (int64_t j = 0; j < p; ++j) row[j] += a * b[j];
      }
    }
  });
  return want;
}

c10::ScalarType storage_type(const std::string& dtype) {
  if (dtype == "fp64") return torch::kFloat64;
  if (dtype == "fp16") return torch::kFloat16;
  if (dtype == "bf16") return torch::kBFloat16;
  return torch::kFloat32;  // fp32, tf32
}

// Sets the fp32 matmul precision for one run and puts the process's back after it.
class MatmulPrecision {
 public:
  explicit MatmulPrecision(const std::string& dtype) : before_(at::globalContext().float32MatmulPrecision()) {
    at::globalContext().setFloat32MatmulPrecision(dtype == "tf32" ? "high" : "highest");
  }
  ~MatmulPrecision() {
    at::globalContext().setFloat32MatmulPrecision(before_ == at::Float32MatmulPrecision::HIGH     ? "high"
                                                  : before_ == at::Float32MatmulPrecision::MEDIUM ? "medium"
                                                                                                  : "highest");
  }

 private:
  at::Float32MatmulPrecision before_;
};

// `rows` x `cols` from a `p` x `q` block repeated (the period of the inputs and the answer).
torch::Tensor tiled(const torch::Tensor& block, int64_t rows, int64_t cols) {
  const int64_t p = block.size(0), q = block.size(1);
  return block.repeat({(rows + p - 1) / p, (cols + q - 1) / q}).narrow(0, 0, rows).narrow(1, 0, cols).contiguous();
}

torch::Tensor int64_view(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return torch::from_blob(const_cast<int64_t*>(values.data()), {rows, cols}, torch::kInt64);
}

const faults::FaultSpec* gemm_fault_for(const std::string& device, const std::string& dtype) {
  const faults::FaultSpec* spec = faults::find("gemm-wrong");
  if (!spec) return nullptr;
  const std::string d = spec->text_param("device", "*"), t = spec->text_param("dtype", "fp32");
  return (d == "*" || d == device) && (t == "*" || t == dtype) ? spec : nullptr;
}

}  // namespace

std::vector<GemmDevice> gemm_devices(const std::string& option) {
  const bool have_cuda = torch::cuda::is_available();
  if (option == "cuda" && !have_cuda) throw UsageError("--device cuda: no CUDA device is visible to ddx health");
  if (option == "cpu" || !have_cuda) return {GemmDevice{"cpu", torch::Device(torch::kCPU)}};
  std::vector<GemmDevice> devices;
  for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) {
    devices.push_back({"gpu" + std::to_string(i), torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i))});
  }
  return devices;
}

std::vector<std::string> gemm_dtypes(const GemmDevice& device) {
  std::vector<std::string> supported;
  for (const std::string dtype : {"fp32", "tf32", "fp16", "bf16", "fp64"}) {
    if (dtype == "tf32" && !device.device.is_cuda()) continue;
    try {
      const auto options = torch::TensorOptions().dtype(storage_type(dtype)).device(device.device);
      torch::mm(torch::ones({8, 8}, options), torch::ones({8, 8}, options));
      supported.push_back(dtype);
    } catch (const c10::Error&) {
      // "addmm_impl_cpu_" not implemented for 'Half' and the like: this device has no such GEMM.
    }
  }
  return supported;
}

int64_t gemm_size(const GemmDevice& device) { return device.device.is_cuda() ? 4096 : 512; }

KnownAnswer make_known_answer(const std::string& dtype, int64_t size) {
  const InputRule r = rule_for(dtype);
  check_exact(dtype, r, kInner);
  KnownAnswer answer;
  answer.dtype = dtype;
  answer.m = answer.n = size;
  answer.k = kInner;
  answer.period = std::min(kPeriod, size);
  const int64_t p = answer.period, k = kInner;
  FixedSequence sequence(0x6b6e6f776eULL);
  answer.a0.resize(static_cast<size_t>(p * k));
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      answer.a0[static_cast<size_t>(i * k + kk)] = (i + kk) % r.every == 0 ? sequence.uniform(r.a_max) : 0;
    }
  }
  answer.b0.resize(static_cast<size_t>(k * p));
  for (int64_t& b : answer.b0) b = sequence.uniform(r.b_max);
  answer.want = exact_product(answer.a0, answer.b0, p, k);
  return answer;
}

std::string describe(const Comparison& c) {
  if (c.wrong == 0) return printf_text("exact (%lld elements)", static_cast<long long>(c.elements));
  const WrongElement& w = *c.first;
  return printf_text("wrong at (%lld,%lld): %.17g not %lld (%lld of %lld elements)", static_cast<long long>(w.row),
                     static_cast<long long>(w.col), w.got, static_cast<long long>(w.want), static_cast<long long>(c.wrong),
                     static_cast<long long>(c.elements));
}

PlacedGemm::PlacedGemm(const KnownAnswer& answer, const GemmDevice& device) : answer_(answer), device_(device) {
  const c10::ScalarType type = storage_type(answer.dtype);
  a_ = tiled(int64_view(answer.a0, answer.period, answer.k).to(type), answer.m, answer.k).to(device.device);
  b_ = tiled(int64_view(answer.b0, answer.k, answer.period).to(type), answer.k, answer.n).to(device.device);
  c_ = torch::empty({answer.m, answer.n}, torch::TensorOptions().dtype(type).device(device.device));
}

double PlacedGemm::flops() const {
  return 2.0 * static_cast<double>(answer_.m) * static_cast<double>(answer_.n) * static_cast<double>(answer_.k);
}

void PlacedGemm::run() {
  MatmulPrecision precision(answer_.dtype);
  torch::mm_out(c_, a_, b_);
}

void PlacedGemm::synchronize() const {
  if (device_.device.is_cuda()) torch::cuda::synchronize(device_.device.index());
}

Comparison PlacedGemm::compare_on_host() const {
  // fp16, bf16 and fp32 values are all exact in fp64: the conversion changes none.
  torch::Tensor got = c_.to(torch::kFloat64).to(torch::kCPU).contiguous();
  double* values = got.data_ptr<double>();
  const int64_t m = answer_.m, n = answer_.n, p = answer_.period;
  if (const faults::FaultSpec* fault = gemm_fault_for(device_.label, answer_.dtype)) {
    const int64_t row = fault->int_param("row", 0, 0, m - 1), col = fault->int_param("col", 0, 0, n - 1);
    values[row * n + col] += 1;
    if (!fault_logged_) {
      fault_logged_ = true;
      faults::log_firing(*fault, printf_text("element (%lld,%lld) of the %s %s product is one off",
                                             static_cast<long long>(row), static_cast<long long>(col),
                                             device_.label.c_str(), answer_.dtype.c_str()));
    }
  }
  Comparison c;
  c.elements = m * n;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t* want = &answer_.want[static_cast<size_t>((i % p) * p)];
    const double* row = values + i * n;
    for (int64_t j0 = 0; j0 < n; j0 += p) {  // the answer's row repeats every p columns
      const int64_t span = std::min(p, n - j0);
      for (int64_t j = 0; j < span; ++j) {
        if (row[j0 + j] == static_cast<double>(want[j])) continue;
        if (c.wrong++ == 0) c.first = WrongElement{i, j0 + j, row[j0 + j], want[j]};
      }
    }
  }
  return c;
}

void PlacedGemm::count_wrong_on_device(torch::Tensor& counter) {
  if (!exact_.defined()) {
    exact_ = tiled(int64_view(answer_.want, answer_.period, answer_.period).to(c_.scalar_type()), answer_.m, answer_.n)
                 .to(device_.device);
  }
  counter.add_(c_.ne(exact_).sum());
}

void check_gemm_fault(const std::vector<GemmDevice>& devices) {
  const faults::FaultSpec* spec = faults::find("gemm-wrong");
  if (!spec) return;
  const int64_t row = spec->int_param("row", 0, 0, 1 << 20), col = spec->int_param("col", 0, 0, 1 << 20);
  const std::string target = spec->text_param("device", "*");
  bool any = false;
  for (const GemmDevice& d : devices) {
    if (target != "*" && target != d.label) continue;
    any = true;
    const int64_t size = gemm_size(d);
    if (row >= size || col >= size) {
      spec->fail(printf_text("row=%lld,col=%lld is outside the %lld x %lld known-answer product on %s",
                             static_cast<long long>(row), static_cast<long long>(col), static_cast<long long>(size),
                             static_cast<long long>(size), d.label.c_str()));
    }
  }
  if (!any) {
    std::vector<std::string> labels;
    for (const GemmDevice& d : devices) labels.push_back(d.label);
    spec->fail("device=" + target + " is not a device of this run (" + join(labels) + ")");
  }
}

}  // namespace ddx::health
