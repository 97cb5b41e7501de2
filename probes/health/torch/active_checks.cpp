// Levels 2 and 3 of `ddx health` in the order they run (active_checks.h): the known-answer
// GEMMs, the compute and memory figures, the all-reduce across the node's devices, the storage
// test of each path; level 3 then the links between the GPUs and the burn-in.
#include "health/active_checks.h"

#include <torch/cuda.h>

#include <cstdlib>

#include "ddx/errors/errors.h"
#include "ddx/processes/run_process.h"
#include "health/local_collectives.h"
#include "health/storage_check.h"
#include "health/torch/active_parts.h"

namespace ddx::health {
namespace {

// A stage that could not run at all is one UNKNOWN row; bad input still stops the run.
template <typename Stage>
void run_stage(std::vector<Check>& rows, const std::string& name, Stage stage) {
  try {
    const std::vector<Check> more = stage();
    rows.insert(rows.end(), more.begin(), more.end());
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    Check c;
    c.name = name;
    c.state = State::Unknown;
    c.value = std::string("ddx could not run it: ") + e.what();
    c.remediation = "rerun ddx health; report it with this line if it returns";
    rows.push_back(c);
  }
}

Check skipped(const std::string& name, const std::string& why) {
  Check c;
  c.name = name;
  c.skipped = true;
  c.value = why;
  return c;
}

int gpu_count(const std::vector<GemmDevice>& devices) {
  int n = 0;
  for (const GemmDevice& d : devices) n += d.device.is_cuda() ? 1 : 0;
  return n;
}

// Several GPUs: one NCCL rank per GPU. CPU only: two Gloo ranks. One GPU: nothing to cross.
std::vector<Check> all_reduce_rows(const std::vector<GemmDevice>& devices) {
  const int gpus = gpu_count(devices);
  if (gpus == 1) return {skipped("all-reduce", "one GPU: no devices to all-reduce across")};
  LocalRun run;
  run.ddx = self_executable();
  run.ranks = gpus > 1 ? gpus : 2;
  run.engine = gpus > 1 ? "nccl" : "gloo";
  run.timeout_s = 45;
  return {all_reduce_check(run)};
}

std::vector<Check> link_rows(const std::vector<GemmDevice>& devices) {
  const int gpus = gpu_count(devices);
  if (gpus < 2) return {skipped("links", gpus == 1 ? "one GPU: no links inside the node" : "one device (the CPU): no links inside the node")};
  LocalRun run;
  run.ddx = self_executable();
  run.ranks = gpus;
  run.engine = "nccl";
  run.timeout_s = 180;
  return {pairwise_check(run)};
}

std::vector<Check> storage_rows(const ActiveOptions& o) {
  if (o.paths.empty()) return {skipped("storage", "no --path given")};
  std::vector<Check> rows;
  for (const std::string& path : o.paths) rows.push_back(storage_check(path, o.storage_mib));
  return rows;
}

}  // namespace

std::vector<Check> active_checks(const ActiveOptions& o) {
  if (o.level != 2 && o.level != 3) throw UsageError("--level " + std::to_string(o.level) + ": active checks are levels 2 and 3");
  // A GPU node whose GPUs CUDA cannot see (a driver or runtime that does not load, an empty
  // CUDA_VISIBLE_DEVICES) must not pass on its CPU: no GPU was tested, and CPU figures filed
  // under the GPU model would spoil its baseline. ddx could not check: UNKNOWN.
  if (o.device == "auto" && o.nvml_gpus > 0 && !torch::cuda::is_available()) {
    Check c;
    c.name = "gpus for kernels";
    c.state = State::Unknown;
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    c.value = std::to_string(o.nvml_gpus) + " GPUs listed by NVML, none visible to CUDA (CUDA_VISIBLE_DEVICES " +
              (visible ? "'" + std::string(visible) + "'" : std::string("unset")) + "): no GPU was tested";
    c.remediation = "run nvidia-smi and ddx health --level 2 --device cuda for CUDA's own error (driver and runtime "
                    "versions, CUDA_VISIBLE_DEVICES, a GPU in use by another container)";
    std::vector<Check> rows{c};
    run_stage(rows, "storage", [&]() { return storage_rows(o); });
    return rows;
  }
  const std::vector<GemmDevice> devices = gemm_devices(o.device);
  check_gemm_fault(devices);
  KnownAnswers answers;
  std::vector<Check> rows;
  run_stage(rows, "gemm", [&]() { return gemm_checks(devices, answers); });
  run_stage(rows, "compute", [&]() { return figure_checks(devices); });
  run_stage(rows, "all-reduce", [&]() { return all_reduce_rows(devices); });
  run_stage(rows, "storage", [&]() { return storage_rows(o); });
  if (o.level == 3) {
    run_stage(rows, "links", [&]() { return link_rows(devices); });
    run_stage(rows, "burn-in", [&]() { return burn_in_checks(devices, answers, o.burn_in_s); });
  }
  return rows;
}

}  // namespace ddx::health
