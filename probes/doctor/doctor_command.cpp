// `ddx doctor` on the command line: every rank measures its facts, rank 0 gathers them through
// the store, judges them (doctor_checks.h) and prints one table. Runs under ddx launch, torchrun,
// srun or mpiexec; Gloo only, so a broken NCCL or GPU cannot stop the preflight that would
// explain it.
#include <ATen/Version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/cuda.h>

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/error_report.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/process_group.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/store_gather.h"
#include "ddx/text/text.h"
#include "ddx/version.h"
#include "doctor/doctor_checks.h"
#include "doctor/doctor_command.h"
#include "doctor/doctor_facts.h"
#include "faults/faults.h"

namespace ddx::cli {
namespace {

using nlohmann::json;

struct DoctorFlags {
  std::string json_path;
  std::string save_dir = ".";
  double timeout_s = 60;
};

// This rank's wall clock, in ms; shifted by a clock-skew test fault (faults/kinds/doctor_skews.cpp),
// since simulated hosts share one kernel clock.
int64_t unix_ms() {
  const int64_t skew = [] {
    const faults::FaultSpec* s = faults::find("clock-skew");
    return s ? s->int_param("ms", 0, -86400000, 86400000) : int64_t{0};
  }();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() +
         skew;
}

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// This rank's wall clock minus rank 0's, in ms: rank 0 publishes its clock the moment every
// rank is waiting for it, and each rank reads its own on arrival (the store's one-way latency,
// under a millisecond on a LAN, is included).
double clock_offset_ms(World& world) {
  c10d::Store& store = world.store();
  store.set("ddx/doctor/waiting" + std::to_string(world.rank()), bytes("1"));
  if (world.rank() == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < world.size(); ++r) keys.push_back("ddx/doctor/waiting" + std::to_string(r));
    store.wait(keys);
    store.set("ddx/doctor/clock", bytes(std::to_string(unix_ms())));
    return 0;
  }
  store.wait({"ddx/doctor/clock"});
  const int64_t mine = unix_ms();
  return static_cast<double>(mine - std::stoll(text(store.get("ddx/doctor/clock"))));
}

// Each host's local rank 0 listens on its Gloo address and connects to every other host's;
// the results go into its facts as "reach". The returned listener must stay open until every
// rank has published its facts (report() returns), since peers connect before publishing.
std::unique_ptr<doctor::ReachListener> reach_other_hosts(World& world, json& facts) {
  c10d::Store& store = world.store();
  const bool leader = facts["local_rank"].get<int>() == 0;
  const std::string host = facts["host"].get<std::string>(), address = facts["gloo_interface"]["address"].get<std::string>();
  std::unique_ptr<doctor::ReachListener> listener;
  std::string endpoint = host + "\n-";
  if (leader && !address.empty()) {
    listener = std::make_unique<doctor::ReachListener>(address);
    if (listener->port() > 0) endpoint = host + "\n" + address + "\n" + std::to_string(listener->port());
  }
  store.set("ddx/doctor/endpoint" + std::to_string(world.rank()), bytes(endpoint));
  if (!leader) return listener;
  facts["reach"] = json::array();
  for (int r = 0; r < world.size(); ++r) {
    std::istringstream in(text(store.get("ddx/doctor/endpoint" + std::to_string(r))));
    std::string peer, peer_address;
    int port = 0;
    std::getline(in, peer);
    std::getline(in, peer_address);
    in >> port;
    if (peer == host || port <= 0) continue;  // this host, or a rank that does not listen
    facts["reach"].push_back(doctor::connect_to(peer, peer_address, port, 3000));
  }
  return listener;
}

int report(World& world, const json& mine, const DoctorFlags& flags) {
  const std::vector<std::string> texts = gather_on_rank0(world, "doctor/facts", mine.dump());
  if (world.rank() != 0) return agree_on_verdict(world, "doctor", 0, "");
  std::vector<json> ranks;
  std::set<std::string> hosts;
  for (const auto& t : texts) {
    ranks.push_back(json::parse(t));
    hosts.insert(ranks.back()["host"].get<std::string>());
  }

  const auto rows = doctor::evaluate(ranks);
  std::map<doctor::Status, int> counts;
  for (const auto& r : rows) ++counts[r.status];
  std::printf("ddx doctor: %d rank%s on %zu host%s, rendezvous via %s\n", world.size(), world.size() == 1 ? "" : "s",
              hosts.size(), hosts.size() == 1 ? "" : "s", to_string(world.info().source));
  std::fputs(doctor::format_table(rows).c_str(), stdout);
  const std::string summary = printf_text("doctor: %zu checks: %d PASS, %d WARN, %d FAIL, %d SKIP", rows.size(),
                                           counts[doctor::Status::Pass], counts[doctor::Status::Warn],
                                           counts[doctor::Status::Fail], counts[doctor::Status::Skip]);
  std::printf("%s\n", summary.c_str());
  std::fflush(stdout);
  const int rc = doctor::exit_code(rows);
  if (!flags.json_path.empty()) {
    json out = {{"world_size", world.size()}, {"passed", rc == 0}, {"checks", doctor::to_json(rows)}, {"ranks", ranks}};
    write_file_atomically(flags.json_path, out.dump(2) + "\n");
  }
  // Every rank ends with the verdict (ddx/errors/verdict.h): a FAIL is the doctor's finding, not a crash.
  return agree_on_verdict(world, "doctor", rc, summary + "; " + doctor::failed_checks(rows));
}

}  // namespace

Subcommand add_doctor_command(CLI::App& app) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Preflight on every rank (/dev/shm vs local ranks, ulimits, clock skew, versions, GPUs, "
      "interfaces named in NCCL_*/GLOO_*, MASTER_ADDR, disk, threads, CPU): rank 0 prints one "
      "PASS/WARN/FAIL/SKIP table with a fix per problem. Exit 1 on a FAIL. Run it under ddx "
      "launch, torchrun, srun or mpiexec.");
  cmd->add_option("--json", flags->json_path, "Write every check and every rank's facts as JSON (rank 0)");
  cmd->add_option("--save-dir", flags->save_dir, "Folder whose free disk is checked (where checkpoints go)")
      ->capture_default_str();
  cmd->add_option("--timeout", flags->timeout_s, "Seconds before the rendezvous gives up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();

  return {cmd, [flags]() {
            check_output_file("--json", flags->json_path);  // before the checks, not after them
            const EnvMap env = current_env();
            RendezvousInfo info = resolve_rendezvous(env);
            log::set_rank(info.rank, info.world_size);
            set_error_report_rank(info.rank, info.local_rank, info.world_size);
            ProcessGroupOptions pg;
            pg.store_timeout = std::chrono::milliseconds(static_cast<int64_t>(flags->timeout_s * 1000));
            pg.collective_timeout = pg.store_timeout;
            pg.enable_nccl = false;
            // The doctor talks through the store only. A GLOO_SOCKET_IFNAME naming no interface
            // would kill the world group's creation before the check that reports it could run.
            ::unsetenv("GLOO_SOCKET_IFNAME");
            auto world = World::init(info, pg);
            doctor::FactsInput input;
            input.info = world->info();  // under mpiexec the master address is agreed in init
            input.save_dir = flags->save_dir;
            input.versions = version_report();
            if (const faults::FaultSpec* skew = faults::find("version-skew")) {  // a test fault: one binary
              for (auto& [component, version] : input.versions) {
                if (component == "ddx") version += "+" + skew->text_param("text", "");
              }
            }
            for (auto& v : torch_versions()) {
              if (v.first != "gpus") input.versions.push_back(v);  // GPU counts may differ by host
            }
            input.gpus = static_cast<int>(torch::cuda::device_count());
            input.aten_capability = at::get_cpu_capability();
            json facts = doctor::collect_facts(env, input);
            facts["clock_offset_ms"] = clock_offset_ms(*world);
            const auto listener = reach_other_hosts(*world, facts);
            const int rc = report(*world, facts, *flags);
            world->shutdown();
            return rc;
          }};
}

}  // namespace ddx::cli
