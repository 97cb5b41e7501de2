// all_reduce: every rank ends with the reduction of every rank's `count` elements. A ring moves
// 2(n-1)/n of the data over each link, hence the bus factor.
#include "bandwidth/collective.h"

namespace ddx::bw {
namespace {

Geometry geometry(size_t bytes, size_t elt, int, int) {
  Geometry g;
  g.count = g.send_count = g.recv_count = bytes / elt;
  return g;
}
double algbw_bytes(size_t count, size_t elt, int) { return double(count) * double(elt); }
double bus_factor(int n) { return 2.0 * (n - 1) / n; }
bool has_output(int, int) { return true; }
Source source(const Geometry&, int, int, int, size_t k) { return {true, 0, k}; }

}  // namespace

const CollectiveDef& all_reduce_def() {
  static const CollectiveDef def{Collective::AllReduce, false, true, true, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
