#pragma once
// One FSDP unit (a block, the embeddings, the head, or the root): its flat shard, the
// all-gather that rebuilds its parameters before forward and backward, the free after, and the
// reduce-scatter of its gradients. The schedule (when to gather, prefetch, reshard) is
// FsdpStrategy's; this class only does the mechanics, FSDP2's in C++:
//
//   * The model's parameters of the unit are skeleton tensors (full shape, no storage). While
//     the unit is gathered they all point into one unsharded buffer; resharding frees that
//     buffer's bytes but keeps the storage object. Autograd's saved tensors (the weight, its
//     transposed view) share the storage object, so after a re-gather in backward they see the
//     weights again: this is how FSDP2 frees parameters between forward and backward.
//   * The gathered bytes are written through a separate tensor over the same storage, so the
//     parameters' version counters never change and autograd does not mistake the re-gather
//     for an in-place modification.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "ddx/collectives.h"
#include "ddx/process_group.h"
#include "checkpoint/shard_layout.h"
#include "strategies/held.h"

namespace ddx::train {

struct FsdpDevices {
  torch::Device compute = torch::kCPU;  // where forward/backward run and collectives happen
  torch::Device shard = torch::kCPU;    // where shards, their gradients and the optimizer live
};

struct FsdpPrecision {
  torch::Dtype shard = torch::kFloat32;   // the sharded master copy
  torch::Dtype param = torch::kFloat32;   // unsharded parameters (forward/backward)
  torch::Dtype reduce = torch::kFloat32;  // gradient reduce-scatter
};

class FsdpUnit {
 public:
  enum class State { Sharded, Gathering, Gathered };

  // `parameters`: the unit's skeleton parameters, in `layout` order. The shard starts zeroed.
  FsdpUnit(UnitLayout layout, std::vector<torch::Tensor> parameters, int rank, FsdpDevices devices,
           FsdpPrecision precision);

  const UnitLayout& layout() const { return layout_; }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  State state() const { return state_; }

  // This rank's rows of parameter i (padding excluded), a view into the flat shard; and of
  // its gradient (undefined before the first reduce-scatter of the step).
  torch::Tensor owned_rows(size_t i) const;
  torch::Tensor owned_grad_rows(size_t i) const;
  torch::Tensor& flat_shard() { return shard_; }
  torch::Tensor& flat_shard_grad() { return shard_grad_; }

  // Sharded -> Gathering: starts the all-gather (cast to the parameter dtype first).
  void begin_gather(Group& group);
  // Gathering -> Gathered: waits, allocates the unsharded buffer and copies each parameter out.
  // Returns the seconds spent waiting.
  double finish_gather();
  // Gathered -> Sharded: frees the unsharded buffer.
  void reshard();

  // Copies the parameters' unsharded gradients (undefined ones as zeros) into the [W, shard]
  // layout in the reduce dtype, drops them, and starts the reduce-scatter.
  void begin_reduce_scatter(Group& group);
  bool reducing() const { return reducing_; }
  // Waits and accumulates the result into the shard's gradient (shard dtype and device).
  // Returns the seconds spent waiting.
  double finish_reduce_scatter();

  // The whole parameters from every rank's master shard (or the whole gradients from every
  // rank's gradient shard), float32 or float64 (full_dtype()) on CPU (collective).
  std::vector<torch::Tensor> gather_full(Group& group, Held what) const;

  // Bytes of the unsharded buffer, of any gather or reduce-scatter buffer in flight, and of
  // unsharded gradients currently held.
  int64_t unsharded_bytes() const;
  int64_t transient_bytes() const;
  int64_t unsharded_gradient_bytes() const;
  int64_t shard_bytes() const { return shard_.numel() * static_cast<int64_t>(shard_.element_size()); }

 private:
  void allocate_unsharded();
  void drop_unsharded_gradients();
  // Views of a [W * shard_numel] buffer and a [numel] parameter, row block of rank r.
  void copy_out(const torch::Tensor& gathered, torch::Tensor& full, size_t i) const;
  void copy_in(const torch::Tensor& full, torch::Tensor& gathered, size_t i) const;

  UnitLayout layout_;
  std::vector<torch::Tensor> parameters_;
  int rank_;
  FsdpDevices devices_;
  FsdpPrecision precision_;
  bool padded_ = false;  // some parameter's rows do not divide by the world size

  torch::Tensor shard_;       // [shard_numel], precision.shard, devices.shard
  torch::Tensor shard_grad_;  // same, or undefined
  c10::Storage storage_;      // the unsharded parameters' storage (0 bytes while sharded)
  torch::Tensor unsharded_;   // [full_numel] writer over storage_ (own version counter)

  State state_ = State::Sharded;
  torch::Tensor gather_buffer_;
  Work gather_work_;
  bool reducing_ = false;
  torch::Tensor reduce_input_, reduce_output_;
  Work reduce_work_;
};

}  // namespace ddx::train
