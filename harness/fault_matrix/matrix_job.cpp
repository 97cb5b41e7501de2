// Running the matrix's jobs: one `ddx launch ... -- ddx train` per row in a folder of its own,
// recording its job events in events.jsonl (ddx/watchdog/job_events.h: who failed, what each detector
// named, checkpoints, resumes, all with their times), then what it left behind: processes still
// alive (counted, then killed), the checkpoint folders (each verified against its checksums),
// the loss curve and final weights against the reference.
#include <signal.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

#include "checkpoint/checkpoint.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/processes/processes.h"
#include "ddx/processes/run_process.h"
#include "ddx/processes/shm_namespace.h"
#include "ddx/text/text.h"
#include "harness/fault_matrix/matrix.h"
#include "harness/fault_matrix/matrix_exchange.h"

namespace ddx::faults::matrix {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// The last rank by default: across nodes, a rank of the last node.
int fault_rank(const Options& o) { return o.fault_rank >= 0 ? o.fault_rank : o.nproc * o.nnodes - 1; }
int checkpoint_step(const Options& o) { return ((o.fault_step - 1) / o.ckpt_freq) * o.ckpt_freq; }

std::string substitute(std::string text, const Options& o) {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"{rank}", std::to_string(fault_rank(o))},
      {"{step}", std::to_string(o.fault_step)},
      {"{ckpt}", std::to_string(checkpoint_step(o))},
      {"{prev}", std::to_string(std::max(checkpoint_step(o) - o.ckpt_freq, 0))}};
  for (const auto& [key, value] : values) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
      text.replace(at, key.size(), value);
    }
  }
  return text;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    out.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  out.push_back(text.substr(start));
  return out;
}

// The number after "key=" in a fault spec ("kill@rank=3,step=13"); -1 when absent (every rank or step).
int key_value(const std::string& spec, const std::string& key) {
  for (const std::string& part : split(spec.substr(spec.find('@') + 1), ',')) {
    if (part.rfind(key + "=", 0) == 0) return std::atoi(part.c_str() + key.size() + 1);
  }
  return -1;
}

// How many times longer the faults make a step: a straggler's factor=F (the rows' are whole), else 1.
int slowdown(const std::vector<std::string>& fault_specs) {
  int most = 1;
  for (const std::string& spec : fault_specs) most = std::max(most, key_value(spec, "factor"));
  return most;
}

// A job's folder: <out>/<name>, or across nodes <out>/<name>/node<I>, each node's console,
// traces, metrics and weights in its own.
std::string job_dir(const Options& o, const std::string& name) {
  const std::string base = fs::absolute(o.out_dir).string() + "/" + name;
  return o.nnodes > 1 ? base + "/node" + std::to_string(o.node_rank) : base;
}

// Where the job's checkpoints go: inside its folder, or across nodes beside the nodes' folders,
// one for all of them: a restarted rank on any node must find the checkpoint rank 0 completed,
// so with several machines --out must be on a filesystem they share for rows that recover.
std::string save_dir(const Options& o, const std::string& dir) {
  return o.nnodes > 1 ? fs::path(dir).parent_path().string() + "/out" : dir + "/out";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

// The flags that turn on the named detectors, less those the options turn off. A row's job turns
// on only its own detector (a strategy may refuse another one's flag); the reference turns on
// every selected row's, which must then stay silent and must not change a single bit.
std::vector<std::string> detector_flags(const Options& o, const std::vector<std::string>& names) {
  std::vector<std::string> flags;
  for (const Detector& d : detectors()) {
    const bool wanted = std::find(names.begin(), names.end(), d.name) != names.end();
    const bool off = std::find(o.without.begin(), o.without.end(), d.name) != o.without.end();
    if (wanted && !off) flags.insert(flags.end(), d.flags.begin(), d.flags.end());
    if (wanted && off) flags.insert(flags.end(), d.off_flags.begin(), d.off_flags.end());
  }
  return flags;
}

// shm_size: a private /dev/shm of that size for the job (empty: the node's). Across nodes the
// job's launchers rendezvous one port above the matrix's own store.
std::vector<std::string> launch_argv(const Options& o, int restarts, const std::string& shm_size = "") {
  const std::string ddx = self_executable();
  std::vector<std::string> argv = {ddx, "launch", "--nproc-per-node", std::to_string(o.nproc), "--max-restarts",
                                   std::to_string(restarts), "--grace-period", "2"};
  if (o.nnodes > 1) {
    argv.insert(argv.end(), {"--nnodes", std::to_string(o.nnodes), "--node-rank", std::to_string(o.node_rank),
                             "--master-addr", o.master_addr, "--master-port", std::to_string(o.master_port + 1)});
  }
  if (!shm_size.empty()) argv.insert(argv.end(), {"--shm-size", shm_size});
  argv.push_back("--");
  return argv;
}

std::vector<std::string> train_argv(const Options& o, const std::string& dir, const std::vector<std::string>& fault_specs,
                                    const std::vector<std::string>& detector_names, int restarts,
                                    const std::string& shm_size = "") {
  std::vector<std::string> argv = launch_argv(o, restarts, shm_size);
  const std::vector<std::string> train = {
      self_executable(), "train", "--strategy", o.strategy, "-m", o.model, "-s", "32", "--seed", "7",
      "--lr", "3e-3", "--max-steps", std::to_string(o.max_steps), "--ckpt-freq", std::to_string(o.ckpt_freq),
      "-e", "run", "--save-dir", save_dir(o, dir), "--metrics-file", dir + "/metrics.jsonl", "--log-freq", "1",
      "--no-progress", "--collective-timeout", seconds_text(o.collective_timeout_s), "--trace-dir", dir + "/traces",
      "--final-weights", dir + "/final.safetensors"};
  argv.insert(argv.end(), train.begin(), train.end());
  const auto flags = detector_flags(o, detector_names);
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& spec : fault_specs) argv.insert(argv.end(), {"--fault", spec});
  argv.insert(argv.end(), o.train_args.begin(), o.train_args.end());
  return argv;
}

// The pairwise link matrix over 1 MiB exchanges; the probe takes its faults from DDX_FAULT. Its
// JSON goes into the row's folder, which puts the folder in its command line for the leftover count.
std::vector<std::string> pairs_argv(const Options& o, const std::string& dir) {
  std::vector<std::string> argv = launch_argv(o, 0);
  const std::vector<std::string> probe = {self_executable(), "probe", "bandwidth", "--engine", "gloo",
                                          "--pairs", "-e", "1M", "-n", "5", "--json", dir + "/bandwidth.json"};
  argv.insert(argv.end(), probe.begin(), probe.end());
  return argv;
}

struct Job {
  ProcessOutcome outcome;
  JobEvidence evidence;
  int leftover = 0;
  std::string log;
};

// Processes of the job still alive after the launcher exited (workers carry the job's folder in
// their command line): counted after a short grace for the kernel to reap them, then killed.
int count_and_kill_leftovers(const std::string& dir) {
  std::vector<pid_t> left = live_processes(dir + "/");
  for (auto deadline = Clock::now() + std::chrono::seconds(2); !left.empty() && Clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = live_processes(dir + "/");
  }
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  return static_cast<int>(left.size());
}

// Across nodes, node 0's job is every node's part of it merged (matrix_exchange.h).
Job run_job(const Options& o, const std::string& name, const std::string& dir, const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& env = {}) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  Job job;
  job.log = dir + "/output.txt";
  std::map<std::string, std::string> job_env = env;
  job_env[events::kFileVariable] = dir + "/events.jsonl";
  job.evidence.start_unix_us = events::unix_now_us();
  job.outcome = run_process(argv, job_env, job.log, o.row_timeout_s);
  job.evidence.events = events::read_records(dir + "/events.jsonl");
  job.evidence.dir = dir;
  job.leftover = count_and_kill_leftovers(dir) + job.outcome.left_in_group;
  merge_parts(o, name, job.outcome, job.evidence, job.leftover);
  return job;
}

std::vector<std::pair<int64_t, double>> read_curve(const std::string& path) {
  std::vector<std::pair<int64_t, double>> curve;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("step")) continue;
    const auto& loss = record.contains("loss") ? record["loss"] : nlohmann::json();
    curve.emplace_back(record["step"].get<int64_t>(), loss.is_number() ? loss.get<double>() : std::nan(""));
  }
  return curve;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every complete checkpoint the job left verifies against the checksums in its trainer_state.json.
std::pair<bool, std::string> check_checkpoints(const std::string& saved) {
  const std::string experiment = saved + "/run";
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(experiment + "/checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos) {
      folders.push_back(e.path().string());
    }
  }
  std::sort(folders.begin(), folders.end());
  if (folders.empty()) return {false, "no checkpoint"};
  const train::CheckpointDir checkpoints(experiment);
  std::vector<std::string> steps;
  for (const std::string& folder : folders) {
    try {
      steps.push_back(std::to_string(checkpoints.verify(folder, nlohmann::json::object()).step));
    } catch (const std::exception& e) {
      return {false, e.what()};
    }
  }
  return {true, "steps " + join(steps, ",") + " verify"};
}

// When the fault struck, from the job's own events: the fault's firing; for kinds that do not
// record each firing (straggler, slow-link, corrupt-collective), the step before the fault step,
// or the first step for a fault on every step; else (the pairwise probe, which reports at the
// end) the launcher's start.
double fault_time(const JobEvidence& job, const std::string& spec, int step) {
  const int64_t before = std::max(step - 1, 1);
  const JobEvent* e = job.first("fault.fired", [&](const nlohmann::json& r) { return r.value("spec", "") == spec; });
  if (!e) e = job.first("train.step", [&](const nlohmann::json& r) { return r.value("step", int64_t{0}) == before; });
  if (!e) e = job.first("launch.started");
  return e ? job.at_s(*e) : -1;
}

double seconds_to_diagnosis(const JobEvidence& job, const RowResult& r, const Finding& f) {
  const double fault = fault_time(job, r.faults.front(), r.step);
  return f.at_s < 0 || fault < 0 ? -1 : std::max(0.0, f.at_s - fault);
}

bool restarted(const JobEvidence& job) {
  return job.first("launch.succeeded", [](const nlohmann::json& r) { return r.value("attempt", 0) > 1; }) != nullptr;
}

// When the first attempt failed (its first launcher record, on any node); the job's end when it
// did not.
int64_t first_failure_us(const JobEvidence& job) {
  const JobEvent* failed = job.first("launch.attempt_failed", [](const nlohmann::json& r) { return r.value("attempt", 0) == 1; });
  return failed ? failed->unix_us : std::numeric_limits<int64_t>::max();
}

// Where the restarted run resumed: the step, or "0" when the attempt after the restart found no
// checkpoint and started from scratch.
std::string resumed_at(const JobEvidence& job) {
  const int64_t failed = first_failure_us(job);
  for (const JobEvent& e : job.events) {
    if (e.name == "train.resumed" && e.unix_us > failed) return std::to_string(e.record.value("step", int64_t{0}));
  }
  return "0";
}

// The newest checkpoint the first attempt wrote before it failed: where a fault noticed only some
// steps after it fired must resume ({last} in a row).
std::string last_checkpoint_before_failure(const JobEvidence& job) {
  const int64_t failed = first_failure_us(job);
  int64_t newest = 0;
  for (const JobEvent& e : job.events) {
    if (e.name == "checkpoint.saved" && e.unix_us < failed) newest = std::max(newest, e.record.value("step", int64_t{0}));
  }
  return std::to_string(newest);
}

// The recovered run against the reference: resumed from the checkpoint the row expects, then
// every step's loss and the final weights, exactly.
void judge_recovery(const Job& job, const RowSpec& spec, const Options& o, const Reference& reference, RowResult& r) {
  r.recovered = job.outcome.exit_code == 0 && restarted(job.evidence);
  if (job.outcome.exit_code != 0) {
    r.recovery_note = "did not come back";
    return;
  }
  r.resume_expected = spec.resumes_from == "{last}" ? last_checkpoint_before_failure(job.evidence)
                                                   : substitute(spec.resumes_from, o);
  r.resumed_from = r.recovered ? resumed_at(job.evidence) : "";
  r.recovery_note = !r.recovered           ? "finished without a restart"
                    : r.resumed_from == "0" ? "restarted from scratch"
                                            : "resumed at step " + r.resumed_from;
  const bool right_checkpoint = r.resumed_from == r.resume_expected;
  if (r.recovered && !right_checkpoint) {
    r.recovery_note += ", not from " + (r.resume_expected == "0" ? std::string("scratch") : "the checkpoint of step " + r.resume_expected);
  }
  if (!reference.ok) {
    r.recovery_note += "; no reference to compare with";
    return;
  }
  r.compared = true;
  // Compared even without a restart: a fault nothing caught shows here as a silent difference.
  const auto curve = read_curve(job.evidence.dir + "/metrics.jsonl");
  if (curve != reference.curve) {
    size_t i = 0;
    while (i < curve.size() && i < reference.curve.size() && curve[i] == reference.curve[i]) ++i;
    r.recovery_note += i < curve.size() && i < reference.curve.size()
                           ? "; loss differs from the reference from step " + std::to_string(curve[i].first)
                           : "; " + std::to_string(curve.size()) + " logged steps, the reference has " +
                                 std::to_string(reference.curve.size());
    return;
  }
  const std::string weights = read_bytes(job.evidence.dir + "/final.safetensors");
  if (weights.empty() || weights != read_bytes(reference.weights_path)) {
    r.recovery_note += "; final weights differ from the reference";
    return;
  }
  r.bit_identical = r.recovered && right_checkpoint;
  r.recovery_note += "; loss curve and final weights bit-identical";
}

void judge(const Job& job, const RowSpec& spec, const Reference& reference, const Options& o, RowResult& r) {
  const Detector* expected = find_detector(spec.detector);
  for (const Detector& d : detectors()) {
    const Finding f = d.find(job.evidence);
    if (!f.fired) continue;
    if (&d == expected) {
      r.detected = true;
      r.culprit_named = f.culprit;
      r.how_named = f.how;
      r.seconds_to_diagnosis = seconds_to_diagnosis(job.evidence, r, f);
      r.detected_by.insert(r.detected_by.begin(), d.name);
    } else {
      r.detected_by.push_back(d.name + " (" + f.culprit + ")");
    }
  }
  r.culprit_expected = substitute(spec.culprit, o);
  r.how_expected = spec.how;
  const bool right_way = spec.how.empty() || r.how_named == spec.how;
  r.culprit_correct = r.detected && r.culprit_named == r.culprit_expected && right_way;
  if (r.checkpoints_apply) std::tie(r.checkpoints_intact, r.checkpoints_note) = check_checkpoints(save_dir(o, job.evidence.dir));
  if (r.recovery_applies) judge_recovery(job, spec, o, reference, r);

  std::vector<std::string> why;
  if (job.outcome.timed_out) why.push_back("timed out after " + seconds_text(o.row_timeout_s) + " s");
  if (!r.detected) why.push_back(spec.detector + " did not fire");
  if (r.detected && r.culprit_named != r.culprit_expected) why.push_back(spec.detector + " named " + r.culprit_named + ", not " + r.culprit_expected);
  if (r.detected && r.culprit_named == r.culprit_expected && !right_way) {
    why.push_back(spec.detector + " saw " + r.culprit_named + " end by " + (r.how_named.empty() ? "?" : r.how_named) +
                  ", not " + spec.how + " as the fault does");
  }
  if (r.leftover_processes > 0) why.push_back(std::to_string(r.leftover_processes) + " process(es) left behind");
  if (r.checkpoints_apply && !r.checkpoints_intact) why.push_back("checkpoints: " + r.checkpoints_note);
  if (r.recovery_applies && !r.bit_identical) why.push_back("recovery: " + r.recovery_note);
  // Slowness must not stop training (the probe's exit 1 is its finding, not a failure).
  if (spec.job == "train" && !r.recovery_applies && job.outcome.exit_code != 0) why.push_back("the job failed (exit " + std::to_string(job.outcome.exit_code) + ")");
  r.passed = why.empty();
  r.note = join(why, "; ");
}

}  // namespace

// ddx train's refusal of a detector flag its strategy cannot serve (a `train.flag_refused`
// record), as the rows that asked for that flag: the options, not a fault, are wrong. Any other
// usage error of the job is reported with its message.
std::string refused_flags(const JobEvidence& job, const Options& o, const std::vector<RowSpec>& rows) {
  std::string error;
  for (const JobEvent& e : job.events) {
    if (e.name == "usage_error" && error.empty()) error = e.record.value("message", "");
  }
  for (const JobEvent& e : job.events) {
    if (e.name != "train.flag_refused") continue;
    const std::string refused = e.record.value("flag", "");
    std::vector<std::string> kinds;
    for (const RowSpec& row : rows) {
      const Detector* d = find_detector(row.detector);
      if (!d) continue;
      for (const std::string& flag : d->flags) {
        if (flag == refused) kinds.push_back(row.kind);
      }
    }
    if (kinds.empty()) break;
    return "--strategy " + o.strategy + " cannot run the row(s) " + join(kinds, ", ") + " (ddx train: " + error +
           "); leave them out with --kinds";
  }
  if (!error.empty()) return "ddx train refused the job's flags: " + error;
  return "";
}

Reference run_reference(const Options& o, const std::vector<RowSpec>& rows) {
  Reference ref;
  const std::string dir = job_dir(o, "reference");
  std::vector<std::string> names;
  for (const RowSpec& row : rows) names.push_back(row.detector);
  agree_to_run(o, "reference", "", save_dir(o, dir));
  const Job job = run_job(o, "reference", dir, train_argv(o, dir, {}, names, 0));
  ref.seconds = job.outcome.seconds;
  ref.log = job.log;
  if (o.node_rank != 0) {
    const auto verdict = nlohmann::json::parse(share_verdict(o, "reference", ""));
    ref.ok = verdict.at("ok").get<bool>();
    ref.note = verdict.at("note").get<std::string>();
    ref.refused = verdict.value("refused", "");
    return ref;
  }
  ref.curve = read_curve(dir + "/metrics.jsonl");
  ref.weights_path = dir + "/final.safetensors";
  std::vector<std::string> why;
  if (job.outcome.exit_code != 0) why.push_back("the clean run failed (exit " + std::to_string(job.outcome.exit_code) + ")");
  if (ref.curve.empty() || !fs::exists(ref.weights_path)) why.push_back("no loss curve or final weights");
  for (const Detector& d : detectors()) {
    const Finding f = d.find(job.evidence);
    if (f.fired) why.push_back("false alarm: " + d.name + " named " + f.culprit + " in a clean run");
  }
  if (job.leftover > 0) why.push_back(std::to_string(job.leftover) + " process(es) left behind");
  ref.ok = why.empty();
  ref.note = join(why, "; ");
  if (job.outcome.exit_code != 0) ref.refused = refused_flags(job.evidence, o, rows);
  share_verdict(o, "reference", nlohmann::json({{"ok", ref.ok}, {"note", ref.note}, {"refused", ref.refused}}).dump());
  return ref;
}

std::vector<std::string> row_faults(const Options& o, const RowSpec& spec) {
  std::vector<std::string> faults;
  for (const std::string& s : split(spec.faults, ';')) faults.push_back(substitute(s, o));
  return faults;
}

RowResult run_row(const Options& o, const RowSpec& spec, const Reference& reference) {
  RowResult r;
  r.kind = spec.kind;
  r.faults = row_faults(o, spec);
  r.rank = key_value(r.faults.front(), "rank");
  r.step = key_value(r.faults.front(), "step");
  r.expected_detector = spec.detector;
  r.recovery_applies = spec.recovers;
  const std::string dir = job_dir(o, spec.kind);
  r.checkpoints_apply = spec.job == "train";
  const std::string refused = spec.shm_size.empty() ? "" : shm::private_dev_shm_refused();
  if (const std::string why = agree_to_run(o, spec.kind, refused, save_dir(o, dir)); !why.empty()) {
    r.skipped = true;
    r.note = "needs a private /dev/shm for its job, refused here (" + why +
             "): run the matrix as root (CAP_SYS_ADMIN); the node's own /dev/shm is never filled";
    return r;
  }
  // A straggler is slow, not stopped: its peers wait F - 1 of its steps in each collective, so
  // the row's collective timeout is F times the matrix's, the margin over a step every other row
  // has at any load, and the straggler warning, not the hang watchdog, names it.
  Options row_options = o;
  row_options.collective_timeout_s = o.collective_timeout_s * slowdown(r.faults);
  const Job job = spec.job == "train" ? run_job(o, spec.kind, dir,
                                                train_argv(row_options, dir, r.faults, {spec.detector}, spec.recovers ? 1 : 0, spec.shm_size))
                                      : run_job(o, spec.kind, dir, pairs_argv(o, dir), {{"DDX_FAULT", join(r.faults, ";")}});
  r.exit_code = job.outcome.exit_code;
  r.timed_out = job.outcome.timed_out;
  r.seconds = job.outcome.seconds;
  r.log = job.log;
  r.leftover_processes = job.leftover;
  if (o.node_rank != 0) {  // node 0 judged every node's part
    const auto verdict = nlohmann::json::parse(share_verdict(o, spec.kind, ""));
    r.passed = verdict.at("passed").get<bool>();
    r.note = verdict.at("note").get<std::string>();
    r.table = verdict.at("table").get<std::string>();
    return r;
  }
  judge(job, spec, reference, o, r);
  share_verdict(o, spec.kind, nlohmann::json({{"passed", r.passed}, {"note", r.note}, {"table", table_row(r)}})
                                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return r;
}

}  // namespace ddx::faults::matrix
