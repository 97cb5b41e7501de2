// gemm-wrong: one element of `ddx health`'s known-answer GEMM is off by one, as silent data
// corruption in a GPU or CPU would leave it: the product is computed for real, then element
// (row, col) is changed before it is compared with the exact answer. The GEMM check reads it
// (probes/health/torch/known_answer_gemm.cpp) and must name the device, dtype and element.
#include "faults/faults.h"

#include <set>

namespace ddx::faults {
namespace {

class GemmWrong : public Kind {
  std::string name() const override { return "gemm-wrong"; }
  // A test switch of `ddx health`, like clock-skew for the doctor: it changes what a check reads,
  // not a training job, so the fault matrix has no row for it.
  std::string category() const override { return "test"; }
  std::string summary() const override {
    return "ddx health's known-answer GEMM on device=cpu|gpuN (every device) in dtype=fp32|tf32|fp16|bf16|fp64 "
           "(fp32) gets element row=R,col=C (0,0) off by one";
  }
  std::vector<std::string> keys() const override { return {"device", "dtype", "row", "col"}; }
  void check(const FaultSpec& s) const override {
    const std::string device = s.text_param("device", "*");
    const bool gpu = device.size() > 3 && device.rfind("gpu", 0) == 0 &&
                     device.find_first_not_of("0123456789", 3) == std::string::npos;
    if (device != "*" && device != "cpu" && !gpu) s.fail("device='" + device + "' is not cpu, gpuN or *");
    static const std::set<std::string> dtypes{"fp32", "tf32", "fp16", "bf16", "fp64", "*"};
    const std::string dtype = s.text_param("dtype", "fp32");
    if (dtypes.count(dtype) == 0) s.fail("dtype='" + dtype + "' is not fp32, tf32, fp16, bf16, fp64 or *");
    // The product's size depends on the device; the GEMM check refuses an element outside it.
    s.int_param("row", 0, 0, 1 << 20);
    s.int_param("col", 0, 0, 1 << 20);
  }
};

}  // namespace

const Kind& gemm_wrong_kind() {
  static const GemmWrong kind;
  return kind;
}

}  // namespace ddx::faults
