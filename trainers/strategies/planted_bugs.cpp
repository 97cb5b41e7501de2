#include "strategies/planted_bugs.h"

#include "faults/faults.h"

namespace ddx::train {
namespace {

PlantedBugs read() {
  PlantedBugs b;
  b.local_mean = faults::find_any("local-mean") != nullptr;
  if (const faults::FaultSpec* s = faults::find_any("scale-grad")) {
    b.scale_grad_rank = s->rank;
    b.scale_grad_factor = s->number_param("factor", 1, -1e30, 1e30);
  }
  if (const faults::FaultSpec* s = faults::find_any("scale-grad-element")) {
    b.scale_grad_element_factor = s->number_param("factor", 1, -1e30, 1e30);
  }
  if (const faults::FaultSpec* s = faults::find_any("lr-scale")) b.lr_factor = s->number_param("factor", 1, -1e30, 1e30);
  if (const faults::FaultSpec* s = faults::find_any("skip-bucket")) {
    b.skip_bucket = static_cast<int>(s->int_param("bucket", 0, 0, 1 << 20));
  }
  b.fsdp_double_divide = faults::find_any("fsdp-double-divide") != nullptr;
  b.tp_no_input_reduce = faults::find_any("tp-no-input-reduce") != nullptr;
  b.sp_no_replicated_reduce = faults::find_any("sp-no-replicated-reduce") != nullptr;
  b.pp_double_microbatch = faults::find_any("pp-double-microbatch") != nullptr;
  return b;
}

}  // namespace

const PlantedBugs& planted_bugs() {
  static const PlantedBugs breaks = read();
  return breaks;
}

}  // namespace ddx::train
