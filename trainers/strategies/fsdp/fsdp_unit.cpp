#include "strategies/fsdp/fsdp_unit.h"

#include <c10/core/StorageImpl.h>

#include <chrono>

#include "strategies/planted_bugs.h"
#include "ddx/text/clock_time.h"

namespace ddx::train {
namespace {

int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// Points a tensor's metadata at `storage` (no bytes are touched).
void attach(torch::Tensor& t, const c10::Storage& storage, int64_t offset, at::IntArrayRef sizes) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(storage);
  impl->set_sizes_contiguous(sizes);
  impl->set_storage_offset(offset);
}

}  // namespace

FsdpUnit::FsdpUnit(UnitLayout layout, std::vector<torch::Tensor> parameters, int rank, FsdpDevices devices,
                   FsdpPrecision precision)
    : layout_(std::move(layout)), parameters_(std::move(parameters)), rank_(rank), devices_(devices),
      precision_(precision) {
  TORCH_CHECK(parameters_.size() == layout_.parameters.size(), "FsdpUnit ", layout_.name, ": ",
              parameters_.size(), " parameters for a layout of ", layout_.parameters.size());
  for (const ShardedParameter& p : layout_.parameters) {
    if (p.rows_per_rank * layout_.world_size != p.rows) padded_ = true;
  }
  auto shard_options = torch::TensorOptions().dtype(precision_.shard).device(devices_.shard);
  // Pinned host memory lets offloaded shards travel to the GPU asynchronously.
  if (devices_.shard.is_cpu() && devices_.compute.is_cuda()) shard_options = shard_options.pinned_memory(true);
  shard_ = torch::zeros({layout_.shard_numel}, shard_options);

  // One storage object for all of the unit's parameters, empty until gathered.
  const auto param_options = torch::TensorOptions().dtype(precision_.param).device(devices_.compute);
  storage_ = torch::empty({0}, param_options).storage();
  unsharded_ = torch::empty({0}, param_options);
  attach(unsharded_, storage_, 0, {layout_.full_numel});
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const ShardedParameter& p = layout_.parameters[i];
    TORCH_CHECK(parameters_[i].sizes().vec() == p.shape, "FsdpUnit ", layout_.name, ": parameter ", p.name,
                " has shape ", parameters_[i].sizes(), " but the layout says ", c10::IntArrayRef(p.shape));
    TORCH_CHECK(parameters_[i].scalar_type() == precision_.param, "FsdpUnit ", layout_.name, ": parameter ", p.name,
                " is ", parameters_[i].scalar_type(), ", expected ", precision_.param);
    attach(parameters_[i], storage_, p.full_offset, p.shape);
  }
}

torch::Tensor FsdpUnit::owned_rows(size_t i) const {
  const ShardedParameter& p = layout_.parameters[i];
  std::vector<int64_t> shape = p.shape;
  shape[0] = p.owned_rows(rank_);
  return shard_.narrow(0, p.shard_offset, shape[0] * p.row_numel).view(shape);
}

torch::Tensor FsdpUnit::owned_grad_rows(size_t i) const {
  if (!shard_grad_.defined()) return {};
  const ShardedParameter& p = layout_.parameters[i];
  std::vector<int64_t> shape = p.shape;
  shape[0] = p.owned_rows(rank_);
  return shard_grad_.narrow(0, p.shard_offset, shape[0] * p.row_numel).view(shape);
}

void FsdpUnit::begin_gather(Group& group) {
  TORCH_CHECK(state_ == State::Sharded, "FsdpUnit ", layout_.name, ": gather while not sharded");
  torch::Tensor input = shard_.to(devices_.compute, precision_.param, /*non_blocking=*/true);
  gather_buffer_ = torch::empty({layout_.world_size * layout_.shard_numel}, input.options());
  CallSite site(CallSite::current() + " fsdp all-gather " + layout_.name);
  gather_work_ = all_gather(group, gather_buffer_, input);
  state_ = State::Gathering;
}

double FsdpUnit::finish_gather() {
  TORCH_CHECK(state_ == State::Gathering, "FsdpUnit ", layout_.name, ": finish_gather without a gather");
  const auto t0 = std::chrono::steady_clock::now();
  gather_work_.wait();
  const double waited = seconds_since(t0);
  gather_work_ = Work();
  allocate_unsharded();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) copy_out(gather_buffer_, unsharded_, i);
  gather_buffer_ = torch::Tensor();
  state_ = State::Gathered;
  return waited;
}

void FsdpUnit::allocate_unsharded() {
  c10::StorageImpl* impl = storage_.unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(layout_.full_numel) * c10::elementSize(precision_.param);
  impl->set_data_ptr_noswap(impl->allocator()->allocate(bytes));
  impl->set_nbytes(bytes);
}

void FsdpUnit::reshard() {
  if (state_ == State::Gathering) finish_gather();
  if (state_ != State::Gathered) return;
  c10::StorageImpl* impl = storage_.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, impl->device()));
  impl->set_nbytes(0);
  state_ = State::Sharded;
}

void FsdpUnit::copy_out(const torch::Tensor& gathered, torch::Tensor& full, size_t i) const {
  const ShardedParameter& p = layout_.parameters[i];
  const int64_t w = layout_.world_size, c = p.rows_per_rank, n = p.row_numel;
  torch::Tensor dest = full.narrow(0, p.full_offset, p.numel()).view({p.rows, n});
  torch::Tensor blocks = gathered.view({w, layout_.shard_numel}).narrow(1, p.shard_offset, c * n);
  if (c * w == p.rows) {
    dest.view({w, c, n}).copy_(blocks.view({w, c, n}));  // one strided copy for all ranks
    return;
  }
  for (int r = 0; r < w; ++r) {
    const int64_t rows = p.owned_rows(r);
    if (rows > 0) dest.narrow(0, p.row_begin(r), rows).copy_(blocks[r].narrow(0, 0, rows * n).view({rows, n}));
  }
}

void FsdpUnit::copy_in(const torch::Tensor& full, torch::Tensor& gathered, size_t i) const {
  const ShardedParameter& p = layout_.parameters[i];
  const int64_t w = layout_.world_size, c = p.rows_per_rank, n = p.row_numel;
  torch::Tensor src = full.reshape({p.rows, n});
  torch::Tensor blocks = gathered.view({w, layout_.shard_numel}).narrow(1, p.shard_offset, c * n);
  if (c * w == p.rows) {
    blocks.view({w, c, n}).copy_(src.view({w, c, n}));
    return;
  }
  for (int r = 0; r < w; ++r) {
    const int64_t rows = p.owned_rows(r);
    if (rows > 0) blocks[r].narrow(0, 0, rows * n).view({rows, n}).copy_(src.narrow(0, p.row_begin(r), rows));
  }
}

void FsdpUnit::begin_reduce_scatter(Group& group) {
  TORCH_CHECK(!reducing_, "FsdpUnit ", layout_.name, ": reduce-scatter already in flight");
  const auto options = torch::TensorOptions().dtype(precision_.reduce).device(devices_.compute);
  const int64_t total = layout_.world_size * layout_.shard_numel;
  // Padding rows must reduce to zero; without padding every element is overwritten.
  reduce_input_ = padded_ ? torch::zeros({total}, options) : torch::empty({total}, options);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const torch::Tensor& g = parameters_[i].grad();
      if (g.defined()) {
        copy_in(g, reduce_input_, i);
      } else if (!padded_) {
        copy_in(torch::zeros(layout_.parameters[i].shape, options), reduce_input_, i);
      }
    }
  }
  drop_unsharded_gradients();
  if (planted_bugs().scale_grad_rank == rank_) reduce_input_.mul_(planted_bugs().scale_grad_factor);  // on purpose
  reduce_output_ = torch::empty({layout_.shard_numel}, options);
  CallSite site(CallSite::current() + " fsdp reduce-scatter " + layout_.name);
  reduce_work_ = reduce_scatter(group, reduce_output_, reduce_input_, ReduceOp::Sum);
  reducing_ = true;
}

double FsdpUnit::finish_reduce_scatter() {
  if (!reducing_) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  reduce_work_.wait();
  const double waited = seconds_since(t0);
  reduce_work_ = Work();
  reduce_input_ = torch::Tensor();
  torch::Tensor result = reduce_output_.to(devices_.shard, precision_.shard);
  reduce_output_ = torch::Tensor();
  // The bug the parity suite must catch: averaging on top of the global-token normalisation.
  if (planted_bugs().fsdp_double_divide) result = result / static_cast<double>(layout_.world_size * layout_.world_size);
  if (shard_grad_.defined()) {
    shard_grad_.add_(result);
  } else {
    shard_grad_ = result;
  }
  reducing_ = false;
  return waited;
}

void FsdpUnit::drop_unsharded_gradients() {
  for (auto& p : parameters_) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

std::vector<torch::Tensor> FsdpUnit::gather_full(Group& group, Held what) const {
  const torch::Tensor& flat = what == Held::Parameters ? shard_ : shard_grad_;
  const torch::Dtype dtype = full_dtype(shard_.scalar_type());
  torch::Tensor input = flat.defined() ? flat.to(devices_.compute, dtype)
                                       : torch::zeros({layout_.shard_numel}, shard_.options().dtype(dtype).device(devices_.compute));
  torch::Tensor gathered = torch::empty({layout_.world_size * layout_.shard_numel}, input.options());
  all_gather(group, gathered, input).wait();
  torch::Tensor full = torch::empty({layout_.full_numel}, input.options());
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    copy_out(gathered, full, i);
    const ShardedParameter& p = layout_.parameters[i];
    out.push_back(full.narrow(0, p.full_offset, p.numel()).view(p.shape).to(torch::kCPU).clone());
  }
  return out;
}

int64_t FsdpUnit::unsharded_bytes() const {
  return state_ == State::Gathered ? layout_.full_numel * static_cast<int64_t>(c10::elementSize(precision_.param)) : 0;
}

int64_t FsdpUnit::transient_bytes() const {
  return bytes_of(gather_buffer_) + bytes_of(reduce_input_) + bytes_of(reduce_output_);
}

int64_t FsdpUnit::unsharded_gradient_bytes() const {
  int64_t total = 0;
  for (const auto& p : parameters_) total += bytes_of(p.grad());
  return total;
}

}  // namespace ddx::train
