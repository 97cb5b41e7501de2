#include "bandwidth/collective.h"

#include <algorithm>

namespace ddx::bw {

const CollectiveDef& definition(Collective c) {
  switch (c) {
    case Collective::AllReduce: return all_reduce_def();
    case Collective::AllGather: return all_gather_def();
    case Collective::ReduceScatter: return reduce_scatter_def();
    case Collective::Broadcast: return broadcast_def();
    case Collective::Reduce: return reduce_def();
    case Collective::AllToAll: return alltoall_def();
    case Collective::SendRecv: return sendrecv_def();
  }
  return all_reduce_def();
}

size_t printed_size(const Geometry& g, size_t elt) {
  return std::max(g.send_count, g.recv_count) * elt;
}

double algbw_gbs(const CollectiveDef& def, size_t count, size_t elt, int nranks, double seconds) {
  if (seconds <= 0) return 0;
  return def.algbw_bytes(count, elt, nranks) / 1.0e9 / seconds;
}

double busbw_gbs(const CollectiveDef& def, size_t count, size_t elt, int nranks, double seconds) {
  return algbw_gbs(def, count, elt, nranks, seconds) * def.bus_factor(nranks);
}

size_t aligned_block_count(size_t total_count, size_t elt, int nranks) {
  const size_t per_rank = total_count / static_cast<size_t>(nranks);
  const size_t align = elt >= 16 ? 1 : 16 / elt;
  return per_rank & ~(align - 1);
}

}  // namespace ddx::bw
