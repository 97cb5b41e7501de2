#include "faults/faults.h"

#include <mutex>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/text/log.h"
#include "ddx/text/text.h"

namespace ddx::faults {
namespace {

struct State {
  std::mutex mutex;
  bool parsed = false;
  std::vector<std::string> flag_texts;
  std::vector<FaultSpec> specs;
  int rank = -1;    // the rendezvous's rank from the environment (any launcher), or set_rank
  int attempt = 0;  // restarts so far: ddx launch's plus a requeued SLURM job's
  int64_t step = 0;
};

State& state() {
  static State s;
  return s;
}

// The switches folded into DDX_FAULT: still set in some shell, they would otherwise be ignored
// in silence and a test believed to be broken would pass.
void reject_retired(const EnvMap& env) {
  static const char* retired[][2] = {
      {"DDX_TEST_PERTURB", "corrupt-collective@rank=R,op=OP or slow-link@rank=R,op=OP,ms=N"},
      {"DDX_TEST_BREAK", "local-mean, scale-grad@rank=R,factor=F, skip-bucket@bucket=K, ..."},
      {"DDX_TEST_HOST_MEMORY", "host-memory@bytes=N"}};
  for (const auto& r : retired) {
    if (env_get(env, r[0])) {
      throw UsageError(std::string(r[0]) + " is no longer read: set DDX_FAULT=" + r[1] + " (docs/faults.md)");
    }
  }
}

void parse_once() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.parsed) return;
  {
    const EnvMap env = current_env();
    reject_retired(env);
    std::vector<FaultSpec> specs;
    if (auto text = env_get(env, "DDX_FAULT")) specs = parse_list(*text, "DDX_FAULT");
    for (const std::string& t : s.flag_texts) specs.push_back(parse_spec(t, "--fault"));
    // A later attempt is any restart: ddx launch's (--max-restarts) or SLURM's (a requeued
    // job, sbatch --requeue / scontrol requeue), so a fault of the first run does not fire again.
    for (const char* key : {"TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
      if (auto restart = env_get(env, key)) s.attempt += static_cast<int>(parse_int(key, *restart, 0, 1 << 20));
    }
    // The rank as the rendezvous will read it, whichever launcher started the process (torchrun's
    // RANK, srun's SLURM_PROCID, MPI's); a broken layout is left for the rendezvous to report.
    try {
      s.rank = resolve_rendezvous(env).rank;
    } catch (const UsageError&) {
    }
    s.specs = std::move(specs);
    s.parsed = true;
  }
}

bool mine(const FaultSpec& spec) {
  const State& s = state();
  return spec.targets(s.rank < 0 ? 0 : s.rank) && (spec.attempt < 0 || spec.attempt == s.attempt);
}

}  // namespace

void add_flag_spec(const std::string& text) { state().flag_texts.push_back(text); }

void reset_for_tests(std::vector<FaultSpec> specs, int rank, int attempt) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.specs = std::move(specs);
  s.parsed = true;
  s.rank = rank;
  s.attempt = attempt;
  s.step = 0;
}

void announce() {
  if (all().empty()) return;
  log::warn("injected faults and test switches are set; results of this process are not clean: ",
            join(report_entry(), "; "));
}

const std::vector<FaultSpec>& all() {
  parse_once();
  return state().specs;
}

void set_rank(int rank, int world_size, int64_t max_step) {
  for (const FaultSpec& spec : all()) {
    // A planted bug's rank is a data-parallel group rank, and the parity suite's single-device
    // baseline runs with the same environment: not checked against this world.
    if (spec.rank >= world_size && find_kind(spec.kind)->category() != "planted bug") {
      spec.fail("rank " + std::to_string(spec.rank) + " is outside the world of " + std::to_string(world_size) +
                " rank(s) (valid kinds: " + kind_names() + ")");
    }
    if (max_step > 0 && spec.step > max_step) {
      spec.fail("step " + std::to_string(spec.step) + " is past the run's last step " + std::to_string(max_step) +
                " (valid kinds: " + kind_names() + ")");
    }
  }
  state().rank = rank;
}

const FaultSpec* find(const std::string& kind) {
  for (const FaultSpec& spec : all()) {
    if (spec.kind == kind && mine(spec)) return &spec;
  }
  return nullptr;
}

const FaultSpec* find_any(const std::string& kind) {
  for (const FaultSpec& spec : all()) {
    if (spec.kind == kind) return &spec;
  }
  return nullptr;
}

std::vector<std::string> report_entry() {
  std::vector<std::string> out;
  for (const FaultSpec& spec : all()) out.push_back(spec.source + " " + spec.text);
  return out;
}

std::string launch_note(const EnvMap& env, const std::vector<std::string>& worker_argv) {
  std::vector<std::string> found;
  if (auto text = env_get(env, "DDX_FAULT")) found.push_back("DDX_FAULT=" + *text);
  for (size_t i = 0; i < worker_argv.size(); ++i) {
    if (worker_argv[i] == "--fault" && i + 1 < worker_argv.size()) found.push_back("--fault " + worker_argv[i + 1]);
    if (worker_argv[i].rfind("--fault=", 0) == 0) found.push_back("--fault " + worker_argv[i].substr(8));
  }
  return found.empty() ? "" : "injected faults: " + join(found, "; ");
}

void log_firing(const FaultSpec& spec, const std::string& what) {
  log::warn("fault ", spec.text, " fires on rank ", state().rank < 0 ? 0 : state().rank, " at step ",
            state().step, ": ", what);
  events::Event("fault.fired")
      .text("spec", spec.text)
      .number("rank", state().rank < 0 ? 0 : state().rank)
      .number("step", state().step)
      .emit();
}

void at_step(int64_t step) {
  state().step = step;
  for (const FaultSpec& spec : all()) {
    if (mine(spec) && spec.at_step(step)) find_kind(spec.kind)->at_step(spec, step);
  }
}

int64_t current_step() { return state().step; }

void during_checkpoint(const std::string& staging) {
  for (const FaultSpec& spec : all()) {
    if (mine(spec) && spec.at_step(state().step)) find_kind(spec.kind)->during_checkpoint(spec, staging);
  }
}

void after_checkpoint(const std::string& folder) {
  for (const FaultSpec& spec : all()) {
    if (mine(spec) && spec.at_step(state().step)) find_kind(spec.kind)->after_checkpoint(spec, folder);
  }
}

const FaultSpec* find_now(const std::string& kind) {
  for (const FaultSpec& spec : all()) {
    if (spec.kind == kind && mine(spec) && spec.at_step(state().step)) return &spec;
  }
  return nullptr;
}

CollectiveCall before_collective(const std::string& op, const std::string& result_op) {
  CollectiveCall call;
  call.op = op;
  call.result_op = result_op.empty() ? op : result_op;
  for (const FaultSpec& spec : all()) {
    const Kind* kind = find_kind(spec.kind);
    if (kind->acts_on_collectives() && mine(spec) && spec.at_step(state().step)) kind->before_collective(spec, call);
  }
  return call;
}

bool touches_collectives() {
  for (const FaultSpec& spec : all()) {
    if (find_kind(spec.kind)->acts_on_collectives() && mine(spec)) return true;
  }
  return false;
}

}  // namespace ddx::faults
