// `ddx probe gpu-health`: every GPU's health from NVML (ECC, row remapping, clock throttling,
// PCIe link, NVLink, temperature, power, XIDs), one PASS/WARN/FAIL/SKIP row per GPU and check.
// Alone it reads every GPU of its host; under a launcher each rank reads its own GPU (local rank
// modulo the GPUs) and rank 0 prints one table for the job, rows named by host and rank. Without
// a driver every host says SKIP with why, exit 0; exit 1 on a FAIL.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <set>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/error_report.h"
#include "ddx/text/log.h"
#include "ddx/nvml.h"
#include "ddx/processes/output_path.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/store_gather.h"
#include "ddx/text/text.h"
#include "ddx/errors/verdict.h"
#include "gpu/gpu_checks.h"
#include "gpu/gpu_health_command.h"
#include "gpu/xid_log.h"

namespace ddx::cli {
namespace {

using nlohmann::json;

struct GpuHealthFlags {
  std::string json_path;
  double timeout_s = 60;
};

// This process's view: the GPUs it read (all of the host's, or just `only`), or why it could not.
json inspect(const std::string& host, int rank, int only) {
  std::string why;
  const auto nvml = Nvml::load(why);
  json mine = {{"host", host}, {"rank", rank}, {"gpus", json::array()}};
  if (!nvml) {
    mine["why"] = why;
    return mine;
  }
  char driver[96] = {};
  const NvmlApi& api = nvml->api();
  if (api.system_driver_version && api.system_driver_version(driver, sizeof driver) == kNvmlSuccess) {
    mine["driver"] = driver;
  }
  mine["nvml"] = nvml->path();
  unsigned count = 0;
  nvml->api().device_count(&count);
  bool readable = false;
  const std::vector<std::string> log = gpu::read_kernel_log(readable);
  const int index = only >= 0 && count > 0 ? only % static_cast<int>(count) : -1;
  for (gpu::GpuFacts f : gpu::read_gpu_facts(*nvml, host, index, log, readable)) {
    f.rank = rank;
    mine["gpus"].push_back(gpu::to_json(f));
  }
  if (count == 0) mine["why"] = "NVML sees no GPU on this host";
  return mine;
}

// Prints rank 0's table and writes the JSON; returns the exit code and, in `verdict`, the line
// every rank ends with when it is not 0 (ddx/errors/verdict.h).
int report(const std::vector<json>& views, int world_size, const GpuHealthFlags& flags, std::string& verdict) {
  std::vector<gpu::GpuFacts> gpus;
  std::vector<doctor::CheckRow> rows;
  std::set<std::string> hosts, skipped;
  std::string driver, nvml;
  for (const json& v : views) {
    hosts.insert(v["host"].get<std::string>());
    for (const auto& g : v["gpus"]) gpus.push_back(gpu::facts_from_json(g));
    if (v.contains("why") && skipped.insert(v["host"].get<std::string>()).second) {
      rows.push_back(gpu::no_nvml(v["host"].get<std::string>(), v["why"].get<std::string>()));
    }
    if (driver.empty()) driver = v.value("driver", "");
    if (nvml.empty()) nvml = v.value("nvml", "");
  }
  const auto gpu_rows = gpu::check_gpus(gpus);
  rows.insert(rows.end(), gpu_rows.begin(), gpu_rows.end());
  std::map<doctor::Status, int> counts;
  for (const auto& r : rows) ++counts[r.status];
  std::printf("ddx probe gpu-health: %zu GPU%s on %zu host%s (%d rank%s)%s\n", gpus.size(), gpus.size() == 1 ? "" : "s",
              hosts.size(), hosts.size() == 1 ? "" : "s", world_size, world_size == 1 ? "" : "s",
              nvml.empty() ? "" : (", NVML " + nvml + (driver.empty() ? "" : ", driver " + driver)).c_str());
  std::fputs(doctor::format_table(rows).c_str(), stdout);
  const std::string summary =
      printf_text("gpu-health: %zu checks: %d PASS, %d WARN, %d FAIL, %d SKIP%s", rows.size(), counts[doctor::Status::Pass],
                  counts[doctor::Status::Warn], counts[doctor::Status::Fail], counts[doctor::Status::Skip],
                  gpus.empty() && !rows.empty() ? (" (" + rows.front().value + ")").c_str() : "");
  std::printf("%s\n", summary.c_str());
  std::fflush(stdout);
  const int rc = doctor::exit_code(rows);
  verdict = summary + "; " + doctor::failed_checks(rows);
  if (!flags.json_path.empty()) {
    json gpus_json = json::array();
    for (const auto& g : gpus) gpus_json.push_back(gpu::to_json(g));
    json out = {{"probe", "gpu-health"}, {"passed", rc == 0}, {"checks", doctor::to_json(rows)}, {"gpus", gpus_json},
                {"driver", driver}, {"nvml", nvml}};
    write_file_atomically(flags.json_path, out.dump(2) + "\n");
  }
  return rc;
}

}  // namespace

Subcommand add_gpu_health_command(CLI::App& probe) {
  auto flags = std::make_shared<GpuHealthFlags>();
  CLI::App* cmd = probe.add_subcommand(
      "gpu-health",
      "Every GPU's health from NVML (loaded at run time): ECC errors, row remapping, clock throttling, PCIe link "
      "width and generation, NVLink, temperature, power cap, XIDs in the kernel log. One PASS/WARN/FAIL/SKIP row per "
      "GPU and check; SKIP without a driver. Alone: this host's GPUs; under a launcher: each rank's own GPU.");
  cmd->add_option("--json", flags->json_path, "Write every check and every GPU's facts as JSON (rank 0)");
  cmd->add_option("--timeout", flags->timeout_s, "Seconds before the rendezvous gives up (under a launcher)")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  return {cmd, [flags]() {
            log::configure_from_env();
            const RendezvousInfo info = resolve_rendezvous(current_env());
            // Rank 0 writes the JSON: a path it cannot write stops it before anything is read.
            if (info.rank == 0 && !flags->json_path.empty()) check_output_file("--json", flags->json_path);
            std::string verdict;
            if (info.world_size == 1) {
              const int rc = report({inspect(info.hostname, -1, -1)}, 1, *flags, verdict);
              if (rc != 0) write_verdict_report(verdict, rc);
              return rc;
            }
            log::set_rank(info.rank, info.world_size);
            set_error_report_rank(info.rank, info.local_rank, info.world_size);
            ProcessGroupOptions pg;
            pg.store_timeout = std::chrono::milliseconds(static_cast<int64_t>(flags->timeout_s * 1000));
            pg.collective_timeout = pg.store_timeout;
            pg.enable_nccl = false;  // the store only: a sick GPU must not stop its own diagnosis
            auto world = World::init(info, pg);
            const json mine = inspect(info.hostname, world->rank(), info.local_rank);
            const std::vector<std::string> texts = gather_on_rank0(*world, "gpu-health", mine.dump());
            int rc = 0;
            if (world->rank() == 0) {
              std::vector<json> views;
              for (const auto& t : texts) views.push_back(json::parse(t));
              rc = report(views, world->size(), *flags, verdict);
            }
            // Every rank ends with rank 0's verdict: a FAIL is a finding, not a crash.
            rc = agree_on_verdict(*world, "gpu-health", rc, verdict);
            world->shutdown();
            return rc;
          }};
}

}  // namespace ddx::cli
