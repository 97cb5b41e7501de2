// `ddx probe compute`: matrix-multiply throughput on every rank, n x n by n x n (2 n^3 FLOPs),
// as TFLOP/s. fp32 on CPU; bf16, fp16, tf32 and fp32 on a GPU through the same kernel (tf32 is
// fp32 storage with the tensor cores' reduced-precision multiply, switched on per run).
#include <ATen/Context.h>
#include <torch/torch.h>

#include <memory>

#include "ddx/errors/errors.h"
#include "node/node_probe_commands.h"
#include "node/rank_probe.h"

namespace ddx::node {
namespace {

c10::ScalarType storage_type(const std::string& dtype) {
  if (dtype == "bf16") return torch::kBFloat16;
  if (dtype == "fp16") return torch::kFloat16;
  return torch::kFloat32;  // fp32, tf32
}

}  // namespace

std::vector<Kernel> compute_kernels(const Placement& where, const std::vector<int64_t>& wanted_sizes,
                                    const std::vector<std::string>& wanted_dtypes) {
  const std::vector<int64_t> sizes =
      !wanted_sizes.empty() ? wanted_sizes : where.cuda ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{256, 512, 1024};
  const std::vector<std::string> dtypes = !wanted_dtypes.empty() ? wanted_dtypes
                                          : where.cuda      ? std::vector<std::string>{"bf16", "fp16", "tf32", "fp32"}
                                                            : std::vector<std::string>{"fp32"};
  const torch::Device device = where.cuda ? torch::Device(torch::kCUDA, where.device_index) : torch::Device(torch::kCPU);
  std::vector<Kernel> kernels;
  for (const std::string& dtype : dtypes) {
    for (const int64_t n : sizes) {
      const auto options = torch::TensorOptions().dtype(storage_type(dtype)).device(device);
      // Shared so the kernel's copies (one per metric) keep the operands alive.
      auto a = std::make_shared<torch::Tensor>(torch::rand({n, n}, options));
      auto b = std::make_shared<torch::Tensor>(torch::rand({n, n}, options));
      auto c = std::make_shared<torch::Tensor>(torch::empty({n, n}, options));
      const std::string precision = dtype == "tf32" ? "high" : "highest";
      Kernel k;
      k.metric = {dtype + "_n" + std::to_string(n), dtype + " n=" + std::to_string(n), "TFLOP/s"};
      k.work = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      k.scale = 1e12;
      k.run = [a, b, c, precision]() {
        at::globalContext().setFloat32MatmulPrecision(precision);
        torch::mm_out(*c, *a, *b);
      };
      kernels.push_back(std::move(k));
    }
  }
  return kernels;
}

}  // namespace ddx::node

namespace ddx::cli {
namespace {

struct ComputeFlags {
  std::vector<int64_t> sizes;         // empty: 256,512,1024 on CPU; 4096,8192 on GPU
  std::vector<std::string> dtypes;    // empty: fp32 on CPU; bf16,fp16,tf32,fp32 on GPU
};

}  // namespace

Subcommand add_compute_command(CLI::App& probe) {
  auto f = std::make_shared<ComputeFlags>();
  return node::add_rank_probe_command(
      probe, "compute",
      "Matrix-multiply TFLOP/s on every rank (fp32 on CPU; bf16/fp16/tf32/fp32 on GPU), repeated "
      "trials, per rank and per host; names a rank or host well below its peers. Exit 1 when one is named.",
      [f](CLI::App& cmd) {
        cmd.add_option("--sizes", f->sizes, "Matrix sizes n (n x n times n x n); default 256,512,1024 on CPU, "
                                            "4096,8192 on GPU")
            ->delimiter(',')
            ->check(CLI::Range(int64_t{8}, int64_t{65536}));
        cmd.add_option("--dtypes", f->dtypes, "Data types; default fp32 on CPU, bf16,fp16,tf32,fp32 on GPU")
            ->delimiter(',')
            ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
      },
      [f](const node::Placement& where) {
        if (!where.cuda && std::find(f->dtypes.begin(), f->dtypes.end(), "tf32") != f->dtypes.end()) {
          throw UsageError("--dtypes tf32: TF32 is a GPU tensor-core mode; on CPU use fp32");
        }
        return node::compute_kernels(where, f->sizes, f->dtypes);
      });
}

}  // namespace ddx::cli
