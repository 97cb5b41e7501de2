#pragma once
// What each collective means for the probe, one small file per collective (collectives/*.cpp),
// like nccl-tests' <op>.cu: how a sweep size becomes element counts and buffer offsets, how
// many bytes algbw counts and the bus factor (nccl-tests' <op>GetBw), and where each output
// element comes from, so results can be checked exactly.
#include <cstddef>

#include "bandwidth/types.h"

namespace ddx::bw {

// Element counts for one sweep size on one rank (nccl-tests' <op>GetCollByteCount).
struct Geometry {
  size_t count = 0;       // elements passed to the op: the table's `count` column
  size_t send_count = 0;  // elements this rank sends (its input)
  size_t recv_count = 0;  // elements this rank receives (its output)
  // In place the op uses one buffer (the receive buffer): the input starts at `inplace_in`
  // and the output at `inplace_out` elements into it.
  size_t inplace_in = 0;
  size_t inplace_out = 0;
};

// Where output element k of a rank comes from: input element `index` of rank `rank`, or the
// reduction over every rank of their input element `index`.
struct Source {
  bool reduced = false;
  int rank = 0;
  size_t index = 0;
};

struct CollectiveDef {
  Collective id;
  bool rooted;    // honours --root (broadcast, reduce)
  bool reduces;   // honours -o/--op
  bool in_place;  // has an in-place variant (nccl-tests does not check alltoall/sendrecv in place)
  // `bytes` is the sweep size; `elt` the element size.
  Geometry (*geometry)(size_t bytes, size_t elt, int nranks, int rank);
  // Bytes algbw divides by the time (nccl-tests' GetBw base), from the op's count.
  double (*algbw_bytes)(size_t count, size_t elt, int nranks);
  // busbw = algbw x bus_factor (doc/PERFORMANCE.md in nccl-tests).
  double (*bus_factor)(int nranks);
  // Whether this rank's output is defined (reduce: only the root's).
  bool (*has_output)(int rank, int root);
  Source (*source)(const Geometry& g, int rank, int nranks, int root, size_t k);
};

const CollectiveDef& definition(Collective c);

// The printed `size` column: the larger of the bytes sent and received by one rank.
size_t printed_size(const Geometry& g, size_t elt);

// nccl-tests' bandwidth formulas: GB = 1e9 bytes, `seconds` is the per-op time.
double algbw_gbs(const CollectiveDef& def, size_t count, size_t elt, int nranks, double seconds);
double busbw_gbs(const CollectiveDef& def, size_t count, size_t elt, int nranks, double seconds);

// all_gather / reduce_scatter round the per-rank count down so each block is 16-byte aligned:
// (total / n) & ~(16 / elt - 1).
size_t aligned_block_count(size_t total_count, size_t elt, int nranks);

// One definition per file in collectives/.
const CollectiveDef& all_reduce_def();
const CollectiveDef& all_gather_def();
const CollectiveDef& reduce_scatter_def();
const CollectiveDef& broadcast_def();
const CollectiveDef& reduce_def();
const CollectiveDef& alltoall_def();
const CollectiveDef& sendrecv_def();

}  // namespace ddx::bw
