#include "faults/kind.h"

#include "ddx/text/text.h"

namespace ddx::faults {

// One line per kind (faults/kinds/<name>.cpp).
const Kind& kill_kind();
const Kind& segfault_kind();
const Kind& abort_kind();
const Kind& exit_kind();
const Kind& oom_kind();
const Kind& hang_kind();
const Kind& skip_collective_kind();
const Kind& mismatch_kind();
const Kind& store_loss_kind();
const Kind& slow_link_kind();
const Kind& corrupt_collective_kind();
const Kind& straggler_kind();
const Kind& nan_kind();
const Kind& bitflip_kind();
const Kind& ckpt_torn_kind();
const Kind& ckpt_corrupt_kind();
const Kind& disk_full_kind();
const Kind& shm_full_kind();
const Kind& local_mean_kind();
const Kind& scale_grad_kind();
const Kind& skip_bucket_kind();
const Kind& scale_grad_element_kind();
const Kind& lr_scale_kind();
const Kind& fsdp_double_divide_kind();
const Kind& tp_no_input_reduce_kind();
const Kind& sp_no_replicated_reduce_kind();
const Kind& pp_double_microbatch_kind();
const Kind& host_memory_kind();
const Kind& clock_skew_kind();
const Kind& version_skew_kind();
const Kind& gemm_wrong_kind();

const std::vector<const Kind*>& kinds() {
  static const std::vector<const Kind*> all{
      &kill_kind(),        &segfault_kind(),          &abort_kind(),
      &exit_kind(),        &oom_kind(),               &hang_kind(),
      &skip_collective_kind(), &mismatch_kind(),      &store_loss_kind(),
      &slow_link_kind(),   &corrupt_collective_kind(), &straggler_kind(),
      &nan_kind(),         &bitflip_kind(),           &ckpt_torn_kind(),
      &ckpt_corrupt_kind(), &disk_full_kind(),        &shm_full_kind(),
      &local_mean_kind(),
      &scale_grad_kind(),  &scale_grad_element_kind(), &lr_scale_kind(),
      &skip_bucket_kind(), &fsdp_double_divide_kind(),
      &tp_no_input_reduce_kind(), &sp_no_replicated_reduce_kind(), &pp_double_microbatch_kind(), &host_memory_kind(),
      &clock_skew_kind(),  &version_skew_kind(), &gemm_wrong_kind()};
  return all;
}

const Kind* find_kind(const std::string& name) {
  for (const Kind* k : kinds()) {
    if (k->name() == name) return k;
  }
  return nullptr;
}

std::string kind_names() {
  std::vector<std::string> names;
  for (const Kind* k : kinds()) names.push_back(k->name());
  return join(names);
}

}  // namespace ddx::faults
