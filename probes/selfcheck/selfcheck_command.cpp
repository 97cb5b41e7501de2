// `ddx probe selfcheck` on the command line: rendezvous, run the checks, report.
#include <torch/cuda.h>

#include <chrono>
#include <memory>

#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/hang_detection.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/text/text.h"
#include "faults/faults.h"
#include "selfcheck.h"
#include "selfcheck/selfcheck_command.h"

namespace ddx::cli {

namespace {

// "1,7,1000": a list default as it is typed on the command line.
template <typename T>
std::string comma_list(const std::vector<T>& items) {
  std::vector<std::string> text;
  for (const auto& item : items) text.push_back(CLI::detail::to_string(item));
  return join(text, ",");
}

}  // namespace

Subcommand add_selfcheck_command(CLI::App& probe) {
  auto options = std::make_shared<probes::SelfcheckOptions>();
  auto timeout_s = std::make_shared<double>(60.0);
  CLI::App* cmd = probe.add_subcommand(
      "selfcheck",
      "Run every collective on several sizes and dtypes with exactly known results; rank 0 "
      "prints PASS/FAIL per op with the first wrong rank and offset. Run it under ddx launch, "
      "torchrun, srun or mpiexec.");
  cmd->add_option("--sizes", options->sizes, "Elements per rank for each check")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->default_str(comma_list(options->sizes));
  cmd->add_option("--dtypes", options->dtypes, "Data types to check")
      ->delimiter(',')
      ->check(CLI::IsMember({"float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"}))
      ->default_str(comma_list(options->dtypes));
  cmd->add_option("--device", options->device, "Tensors on cpu (Gloo) or cuda (NCCL); auto picks cuda when present")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Write every rank's results as JSON (rank 0)");
  cmd->add_option("--timeout", *timeout_s, "Seconds before a collective or the rendezvous gives up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();

  return {cmd, [options, timeout_s]() {
            check_output_file("--json", options->json_path);  // before the collectives, not after them
            log::configure_from_env();
            RendezvousInfo info = resolve_rendezvous(current_env());
            log::set_rank(info.rank, info.world_size);
            set_error_report_rank(info.rank, info.local_rank, info.world_size);
            if (options->device == "auto") options->device = torch::cuda::is_available() ? "cuda" : "cpu";
            if (options->device == "cuda" && !torch::cuda::is_available()) {
              throw UsageError("--device cuda: no CUDA device is visible to rank " + std::to_string(info.rank));
            }
            ProcessGroupOptions pg;
            pg.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
            pg.store_timeout = pg.collective_timeout;
            pg.enable_nccl = options->device == "cuda";
            const auto t0 = std::chrono::steady_clock::now();
            auto world = World::init(info, pg);
            faults::install_collective_faults(world->rank(), world->size());
            // A selfcheck that hangs leaves flight-recorder dumps when DDX_TRACE_DIR is set.
            // Dump and go on: a failed collective is reported in the selfcheck's own table.
            HangOptions hang_defaults;
            hang_defaults.on_timeout = OnTimeout::Dump;
            HangOptions hang_options = hang_options_from_env(current_env(), hang_defaults);
            hang_options.collective_timeout = pg.collective_timeout;
            auto hang_detection = HangDetection::install(*world, hang_options);
            log::debug("selfcheck: ", info.describe());
            auto results = probes::run_checks(world->world(), *options);
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const int rc = probes::report_selfcheck(*world, results, *options, seconds);
            hang_detection.reset();
            world->shutdown();
            return rc;
          }};
}

}  // namespace ddx::cli
