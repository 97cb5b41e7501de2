// broadcast: the root's `count` elements reach every rank. Bound by the root's link, so the bus
// factor is 1.
#include "bandwidth/collective.h"

namespace ddx::bw {
namespace {

Geometry geometry(size_t bytes, size_t elt, int, int) {
  Geometry g;
  g.count = g.send_count = g.recv_count = bytes / elt;
  return g;
}
double algbw_bytes(size_t count, size_t elt, int) { return double(count) * elt; }
double bus_factor(int) { return 1.0; }
bool has_output(int, int) { return true; }
Source source(const Geometry&, int, int, int root, size_t k) { return {false, root, k}; }

}  // namespace

const CollectiveDef& broadcast_def() {
  static const CollectiveDef def{Collective::Broadcast, true, false, true, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
