// alltoall: every rank sends block j of `count` elements to rank j. algbw counts count x n
// bytes per rank, (n-1)/n of which leave the rank. No in-place variant (nccl-tests times one
// but cannot check it).
#include "bandwidth/collective.h"

namespace ddx::bw {
namespace {

Geometry geometry(size_t bytes, size_t elt, int n, int) {
  Geometry g;
  g.count = (bytes / elt) / static_cast<size_t>(n);
  g.send_count = g.recv_count = g.count * n;
  return g;
}
double algbw_bytes(size_t count, size_t elt, int n) { return double(count) * n * elt; }
double bus_factor(int n) { return double(n - 1) / n; }
bool has_output(int, int) { return true; }
// Block q of my output is the block rank q addressed to me.
Source source(const Geometry& g, int rank, int, int, size_t k) {
  return {false, static_cast<int>(k / g.count), g.count * rank + k % g.count};
}

}  // namespace

const CollectiveDef& alltoall_def() {
  static const CollectiveDef def{Collective::AllToAll, false, false, false, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
