// reduce: the reduction of every rank's `count` elements lands on the root. Bound by the
// root's link, so the bus factor is 1; only the root's output is defined.
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
bool has_output(int rank, int root) { return rank == root; }
Source source(const Geometry&, int, int, int, size_t k) { return {true, 0, k}; }

}  // namespace

const CollectiveDef& reduce_def() {
  static const CollectiveDef def{Collective::Reduce, true, true, true, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
