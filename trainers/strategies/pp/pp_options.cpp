#include "strategies/pp/pp_options.h"

#include <CLI/CLI.hpp>

#include <filesystem>

#include "ddx/errors/errors.h"
#include "strategies/pp/pp_schedule.h"

namespace ddx::train {

void add_pp_flags(CLI::App& cmd, PpOptions& o) {
  auto* pp = "Pipeline parallel (pp)";
  cmd.add_option("--pp-split", o.split,
                 "First block of every stage after the first, e.g. 2,5 (default: balanced by parameter count)")
      ->delimiter(',')->group(pp);
  cmd.add_option("--pp-schedule", o.schedule, "gpipe, 1f1b or interleaved-1f1b")->capture_default_str()->group(pp);
  cmd.add_option("--pp-virtual-stages", o.virtual_stages, "Stages per rank (interleaved-1f1b)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 10))->capture_default_str()->group(pp);
  cmd.add_option("--microbatches", o.microbatches, "Pipeline micro-batches each -b batch is split into")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str()->group(pp);
  cmd.add_option("--pp-trace", o.trace, "Draw each rank's measured forward/backward/send/recv timeline (SVG)")
      ->group(pp);
}

void check_pp_options(const PpOptions& o, int64_t batch_size) {
  const ScheduleKind& kind = find_schedule(o.schedule);
  if (batch_size % o.microbatches != 0) {
    throw UsageError("--microbatches " + std::to_string(o.microbatches) + " does not divide -b " +
                     std::to_string(batch_size));
  }
  if (o.virtual_stages > 1 && !kind.interleaved) {
    throw UsageError("--pp-virtual-stages " + std::to_string(o.virtual_stages) +
                     " needs --pp-schedule interleaved-1f1b (" + kind.name + " runs one stage per rank)");
  }
  if (!o.trace.empty() && std::filesystem::is_directory(o.trace)) {
    throw UsageError("--pp-trace " + o.trace + " is a folder; it takes the SVG file to write");
  }
}

}  // namespace ddx::train
