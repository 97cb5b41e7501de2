#include "bandwidth/options.h"

#include "ddx/errors/errors.h"

namespace ddx::bw {

void validate(const BandwidthOptions& o, int world_size) {
  // --pairs measures at -e only; -b does not matter there.
  if (!o.pairs && o.max_bytes < o.min_bytes) {
    throw UsageError("-e/--maxbytes (" + std::to_string(o.max_bytes) + ") is below -b/--minbytes (" +
                     std::to_string(o.min_bytes) + ")");
  }
  if (o.root < -1 || o.root >= world_size) {
    throw UsageError("-r/--root " + std::to_string(o.root) + " is outside -1.." +
                     std::to_string(world_size - 1) + " (world size " + std::to_string(world_size) + ")");
  }
  for (RedOp op : o.ops) {
    if (op != RedOp::Avg) continue;
    for (DataType t : o.types) {
      if (!is_floating(t)) {
        throw UsageError(std::string("-o/--op avg needs a floating-point -d/--datatype, got ") + name(t));
      }
    }
  }
  if (o.pairs && world_size < 2) throw UsageError("--pairs needs at least 2 ranks");
  if (o.pair_fraction < 0 || o.pair_fraction > 1) throw UsageError("--pair-fraction must be within 0..1");
}

}  // namespace ddx::bw
