#pragma once
// DDP's own flags (`ddx train --strategy ddp`). No LibTorch: the flag parser builds without it.
namespace CLI {
class App;
}

namespace ddx::train {

// The gradient bucket size of DDP, and of the strategies that sum gradients in buckets without
// a flag of their own (tp's and 2d's replicated parameters, pp's replicas).
constexpr double kDefaultBucketCapMb = 25;

struct DdpOptions {
  bool verify_init = false;       // compare parameter checksums instead of broadcasting rank 0's
  double bucket_cap_mb = kDefaultBucketCapMb;
  double first_bucket_mb = 1;     // the first (last-layer) bucket, small so its all-reduce starts early
  bool grad_as_bucket_view = false;
  bool zero1 = false;             // shard the optimizer state over the data-parallel ranks
};

// Adds DDP's flags to `ddx train`, bound to `options`.
void add_ddp_flags(CLI::App& cmd, DdpOptions& options);

}  // namespace ddx::train
