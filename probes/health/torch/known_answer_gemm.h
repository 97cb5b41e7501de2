#pragma once
// The known-answer GEMM of `ddx health` (level 2, and the level-3 burn-in): C = A B from fixed
// integer inputs whose product is computed exactly in int64 on the host, so every element the
// device gives must equal it; one that differs is silent data corruption, named by device,
// dtype and element.
//
// Why the device's answer is exact in every dtype. Every entry of A is an integer with
// |a| <= a_max, at most `nonzeros` entries per row of A are non-zero, and every entry of B is an
// integer with |b| <= b_max. Then each product a*b is an integer of magnitude <= a_max*b_max,
// and every partial sum a kernel can form, in any order (tiles, split-K, a tree of reductions),
// is a sum of some of those products, so its magnitude is at most
//     bound = nonzeros * a_max * b_max.
// A binary floating-point format with p significant bits holds every integer of magnitude
// <= 2^p exactly. So if the inputs fit the input format (a_max, b_max <= 2^p_in) and the bound
// fits the output format (bound <= 2^p_out, and the accumulator has at least p_out bits), no
// product, partial sum or result is ever rounded, and the result is the integer answer. k = 1024:
//   fp64 (p = 53) and fp32 (p = 24): dense, |a|, |b| <= 64:            1024 * 64 * 64 = 2^22
//   tf32 (inputs rounded to p = 11, fp32 accumulation): the same inputs, 64 <= 2^11, 2^22 <= 2^24
//   fp16 (p = 11): 512 non-zeros per row of A, |a|, |b| <= 2:          512 * 2 * 2  = 2^11
//   bf16 (p = 8):  256 non-zeros per row of A, |a|, |b| <= 1:          256 * 1 * 1  = 2^8
// fp16 and bf16 results are exact even where a kernel accumulates in the storage format
// itself (cuBLAS' reduced-precision reductions). make_known_answer() checks these bounds.
//
// Sizes: m = n = 512 on a CPU (the BLAS's blocked, vectorised kernels), 4096 on a GPU (more
// output tiles than an H100 has SMs, so every SM computes some), k = 1024. The rows of A and the
// columns of B repeat with a period of 509 (a prime, so no power-of-two tile lines up with it),
// which keeps the host's exact product at 509 x 509 x 1024 multiply-adds per dtype while the
// device computes the whole product.
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddx::health {

// A device the known-answer GEMMs run on: "cpu", or "gpu<N>" for CUDA device N.
struct GemmDevice {
  std::string label;
  torch::Device device{torch::kCPU};
};

// `option` of ActiveOptions::device: auto (every GPU, else the CPU), cpu, or cuda (every GPU;
// UsageError when none is visible).
std::vector<GemmDevice> gemm_devices(const std::string& option);

// The dtypes `device` multiplies: fp32, tf32, fp16, bf16, fp64 on a GPU; on the CPU fp32, fp64,
// bf16 and fp16 where its matmul has a kernel for them (tf32 is a GPU tensor-core mode). A dtype
// whose matmul throws "not implemented" is left out.
std::vector<std::string> gemm_dtypes(const GemmDevice& device);

// The fixed inputs of one dtype and their exact product.
struct KnownAnswer {
  std::string dtype;  // fp32, tf32, fp16, bf16, fp64
  int64_t m = 0, k = 0, n = 0;
  int64_t period = 0;         // rows of A and columns of B repeat with it
  std::vector<int64_t> a0;    // period x k, row-major: row i of A is row i % period of a0
  std::vector<int64_t> b0;    // k x period: column j of B is column j % period of b0
  std::vector<int64_t> want;  // period x period, computed here in int64: C(i, j) = want(i % period, j % period)

  int64_t at(int64_t row, int64_t col) const { return want[(row % period) * period + col % period]; }
};

// m = n = `size`, k = 1024; the same inputs every run.
KnownAnswer make_known_answer(const std::string& dtype, int64_t size);
// The size on `device`: 512 on a CPU, 4096 on a GPU.
int64_t gemm_size(const GemmDevice& device);

struct WrongElement {
  int64_t row = 0, col = 0;
  double got = 0;
  int64_t want = 0;
};

struct Comparison {
  int64_t elements = 0;  // compared
  int64_t wrong = 0;     // that differ from the exact answer
  std::optional<WrongElement> first;
};

// "wrong at (5,17): 31 not 32 (1 of 262144 elements)", or "exact (262144 elements)".
std::string describe(const Comparison& comparison);

// One known answer placed on one device: A and B in the dtype, the product's buffer, and (on
// request) the exact product in the product's dtype for checks on the device.
class PlacedGemm {
 public:
  PlacedGemm(const KnownAnswer& answer, const GemmDevice& device);

  const GemmDevice& device() const { return device_; }
  const KnownAnswer& answer() const { return answer_; }
  double flops() const;  // of one run: 2 m n k

  // C = A B into the product's buffer; asynchronous on a GPU. tf32 runs fp32 storage with the
  // tensor cores' reduced-precision multiply for this call, fp32 with full precision.
  void run();
  // Waits for the device.
  void synchronize() const;
  // Copies C to the host and compares every element with the exact answer, in ddx's own loop
  // (not a kernel of the library under test). A gemm-wrong fault (faults/kinds/gemm_wrong.cpp)
  // targeting this device and dtype changes its element first.
  Comparison compare_on_host() const;
  // Adds the number of elements of C that differ from the exact answer to `counter` (an int64
  // scalar on the device) without waiting: the burn-in checks every product at full speed.
  void count_wrong_on_device(torch::Tensor& counter);

 private:
  const KnownAnswer& answer_;
  GemmDevice device_;
  torch::Tensor a_, b_, c_;
  torch::Tensor exact_;  // the answer in C's dtype on the device, made on first use
  mutable bool fault_logged_ = false;  // a planted wrong element is logged once, not every comparison
};

// Throws UsageError when a gemm-wrong fault names an element outside the `size` x `size` product
// of a device it targets, before any check runs.
void check_gemm_fault(const std::vector<GemmDevice>& devices);

}  // namespace ddx::health
