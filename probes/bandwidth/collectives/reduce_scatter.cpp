// reduce_scatter: each rank sends n blocks of `count` elements and receives the reduction of
// its own block. algbw counts the whole input (count x n), of which (n-1)/n crosses the bus.
#include "bandwidth/collective.h"

namespace ddx::bw {
namespace {

Geometry geometry(size_t bytes, size_t elt, int n, int rank) {
  Geometry g;
  g.count = aligned_block_count(bytes / elt, elt, n);
  g.send_count = g.count * n;
  g.recv_count = g.count;
  g.inplace_in = 0;
  g.inplace_out = g.count * rank;  // in place, my reduced block lands over my input block
  return g;
}
double algbw_bytes(size_t count, size_t elt, int n) { return double(count) * elt * n; }
double bus_factor(int n) { return double(n - 1) / n; }
bool has_output(int, int) { return true; }
Source source(const Geometry& g, int rank, int, int, size_t k) {
  return {true, 0, g.count * rank + k};
}

}  // namespace

const CollectiveDef& reduce_scatter_def() {
  static const CollectiveDef def{Collective::ReduceScatter, false, true, true, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
