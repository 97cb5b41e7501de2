// sendrecv: a ring where each rank sends `count` elements to rank+1 and receives from rank-1 in
// one step; every link carries the data once, so the bus factor is 1. The pairwise mode uses
// the same op with an explicit peer.
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
Source source(const Geometry&, int rank, int n, int, size_t k) {
  return {false, (rank - 1 + n) % n, k};
}

}  // namespace

const CollectiveDef& sendrecv_def() {
  static const CollectiveDef def{Collective::SendRecv, false, false, false, geometry,
                                 algbw_bytes, bus_factor, has_output, source};
  return def;
}

}  // namespace ddx::bw
