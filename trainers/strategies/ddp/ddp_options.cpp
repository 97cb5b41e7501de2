#include "strategies/ddp/ddp_options.h"

#include <CLI/CLI.hpp>

namespace ddx::train {

void add_ddp_flags(CLI::App& cmd, DdpOptions& o) {
  auto* ddp = "Data parallel (ddp)";
  cmd.add_flag("--verify-init", o.verify_init, "Check that every rank built identical weights (checksum) instead of broadcasting rank 0's")->group(ddp);
  cmd.add_option("--bucket-cap-mb", o.bucket_cap_mb, "Gradient bucket size")->check(CLI::Range(0.001, 1e5))->capture_default_str()->group(ddp);
  cmd.add_option("--first-bucket-mb", o.first_bucket_mb, "Size of the first (last-layer) bucket")->check(CLI::Range(0.001, 1e5))->capture_default_str()->group(ddp);
  cmd.add_flag("--grad-as-bucket-view", o.grad_as_bucket_view, "Gradients alias the buckets (no copy)")->group(ddp);
  cmd.add_flag("--zero1", o.zero1, "Shard optimizer state across data-parallel ranks (ZeRO-1)")->group(ddp);
}

}  // namespace ddx::train
