// all_gather: each rank contributes `count` elements and receives all n blocks. algbw counts
// the whole output (count x n); each rank receives (n-1)/n of it over the bus.
#include "bandwidth/collective.h"

namespace ddx::bw {
namespace {

Geometry geometry(size_t bytes, size_t elt, int n, int rank) {
  Geometry g;
  g.count = aligned_block_count(bytes / elt, elt, n);
  g.send_count = g.count;
  g.recv_count = g.count * n;
  g.inplace_in = g.count * rank;  // in place, my block already sits where the output puts it
  g.inplace_out = 0;
  return g;
}
double algbw_bytes(size_t count, size_t elt, int n) { return double(count) * elt * n; }
double bus_factor(int n) { return double(n - 1) / n; }
bool has_output(int, int) { return true; }
Source source(const Geometry& g, int, int, int, size_t k) {
  return {false, static_cast<int>(k / g.count), k % g.count};
}

}  // namespace

const CollectiveDef& all_gather_def() {
  static const CollectiveDef def{Collective::AllGather, false, false, true, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
