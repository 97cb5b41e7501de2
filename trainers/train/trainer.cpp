#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <stdexcept>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/state_files.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "ddx/checksum.h"
#include "ddx/collectives.h"
#include "ddx/watchdog/comm_counters.h"
#include "ddx/processes/env.h"
#include "ddx/errors/error_report.h"
#include "ddx/errors/errors.h"
#include "ddx/hang_detection.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/text/log.h"
#include "ddx/processes/output_path.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/watchdog/store_lost.h"
#include "faults/dist/parameter_faults.h"
#include "faults/faults.h"
#include "models/causal_lm.h"
#include "observe/gpu_stats.h"
#include "observe/loss_plot.h"
#include "observe/metrics.h"
#include "observe/phase_timer.h"
#include "observe/progress_bar.h"
#include "observe/step_profiler.h"
#include "observe/straggler_watch.h"
#include "observe/top_progress.h"
#include "optim/lr_schedule.h"
#include "strategies/planted_bugs.h"
#include "strategies/strategy.h"
#include "strategies/strategy_registry.h"
#include "train/detectors.h"

namespace ddx::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The fewest logged steps the straggler warning averages over (with --straggler-window seconds):
// one long step, a checkpoint or a page-in, is never a straggler by itself.
constexpr int kStragglerMinSteps = 8;

// Preemption: SIGTERM checkpoints and stops, SIGUSR1 checkpoints and goes on. The handler
// only sets a flag; ranks agree on it at the next step boundary.
volatile std::sig_atomic_t g_stop_requested = 0;
volatile std::sig_atomic_t g_checkpoint_requested = 0;
extern "C" void on_preempt_signal(int sig) {
  if (sig == SIGTERM) g_stop_requested = 1;
  g_checkpoint_requested = 1;
}

torch::Device pick_device(const std::string& wanted, int local_rank) {
  const bool have_cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !have_cuda) throw UsageError("--device cuda: no CUDA device is visible");
  if (wanted == "cuda" || (wanted == "auto" && have_cuda)) {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % torch::cuda::device_count()));
  }
  return torch::Device(torch::kCPU);
}

// Rank 0 runs `fn` first (e.g. builds the token cache) while the others wait; then they run it.
// If rank 0 fails (a malformed dataset), the others stop too instead of waiting out a timeout.
void rank0_first(World& world, const std::function<void()>& fn) {
  std::exception_ptr failure;
  if (world.rank() == 0) {
    try {
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  auto failed = torch::tensor({failure ? 1 : 0}, torch::kInt64);
  broadcast(world.world(), failed, 0).wait();
  if (failure) std::rethrow_exception(failure);
  if (failed.item<int64_t>() != 0) throw std::runtime_error("rank 0 failed while preparing the data (see its error)");
  if (world.rank() != 0) fn();
}

// Every rank must train the same model on the same data shape: compare hashes so a mismatch is
// an error that names the ranks, not a hang or a silent divergence.
void agree_on(World& world, const std::string& what, uint64_t hash) {
  if (world.size() == 1) return;
  auto mine = torch::tensor({static_cast<int64_t>(hash)}, torch::kInt64);
  auto all = torch::zeros({world.size()}, torch::kInt64);
  all_gather(world.world(), all, mine).wait();
  std::map<int64_t, std::vector<int>> groups;
  for (int r = 0; r < world.size(); ++r) groups[all[r].item<int64_t>()].push_back(r);
  if (groups.size() == 1) return;
  std::string detail;
  for (const auto& [h, ranks] : groups) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    detail += std::string(detail.empty() ? "" : "; ") + "ranks";
    for (int r : ranks) detail += " " + std::to_string(r);
    detail += " have " + std::string(buf);
  }
  throw UsageError(what + " differs across ranks (" + detail + "): every rank must get the same flags and files");
}

uint64_t hash_text(const std::string& text) {
  Fnv1a64 h;
  h.update(text.data(), text.size());
  return h.digest();
}

std::string rng_state_hex() {
  auto state = at::detail::getDefaultCPUGenerator().get_state();
  static const char* digits = "0123456789abcdef";
  std::string out;
  const uint8_t* p = state.data_ptr<uint8_t>();
  for (int64_t i = 0; i < state.numel(); ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

void restore_rng_state(const std::string& hex) {
  if (hex.empty()) return;
  auto state = torch::empty({static_cast<int64_t>(hex.size() / 2)}, torch::kUInt8);
  uint8_t* p = state.data_ptr<uint8_t>();
  for (size_t i = 0; i + 1 < hex.size(); i += 2) p[i / 2] = static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16));
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_state(state);
}

std::string parameter_checksum(Strategy& strategy) {
  Fnv1a64 h;
  for (const auto& [name, t] : strategy.full_parameters()) {
    h.update(name.data(), name.size());
    auto c = t.contiguous();
    h.update(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return h.hex();
}

// Per-step log lines when no progress bar is drawn (not a terminal, or --no-progress).
bool progress_enabled_on_terminal(bool wanted) { return wanted && ::isatty(STDERR_FILENO); }

std::string timestamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", std::gmtime(&t));
  return buf;
}

// Loads the blocks at global-batch positions [first_position, first_position + ids.size())
// into tensors on `device`; `uneven_tokens` masks labels as --uneven-tokens says.
MicroBatch load_micro_batch(const data::TokenBlocks& blocks, const std::vector<int64_t>& block_ids,
                            int64_t first_position, torch::Device device, bool uneven_tokens) {
  const int64_t b = static_cast<int64_t>(block_ids.size()), T = blocks.seq_length();
  auto raw = torch::empty({b, T + 1}, torch::kInt32);
  for (int64_t i = 0; i < b; ++i) blocks.block(block_ids[i], raw.data_ptr<int32_t>() + i * (T + 1));
  auto tokens = raw.to(torch::kInt64);
  MicroBatch mb;
  // clone(), not contiguous(): with one row the narrowed views already count as contiguous and
  // would share storage, so masking labels would rewrite inputs.
  mb.inputs = tokens.narrow(1, 0, T).clone();
  mb.labels = tokens.narrow(1, 1, T).clone();
  if (uneven_tokens) {
    // Position p ignores its first ((7p mod 13) mod T/2) labels, so ranks hold different
    // token counts at every world size the suite uses.
    for (int64_t i = 0; i < b; ++i) {
      const int64_t masked = (((first_position + i) * 7) % 13) % std::max<int64_t>(1, T / 2);
      mb.labels[i].narrow(0, 0, masked).fill_(-100);
    }
  }
  mb.inputs = mb.inputs.to(device);
  mb.labels = mb.labels.to(device);
  return mb;
}

// The token blocks, checked to hold one global batch before any cache is written (the data
// folder stays as it was when the data is too small).
std::unique_ptr<data::TokenBlocks> load_blocks(const TrainOptions& o, const data::Tokenizer& tokenizer, World& world,
                                               int64_t global_batch) {
  data::BlockRequirement need;
  need.min_blocks = global_batch;
  need.why = "one global batch of " + std::to_string(global_batch) + " (-b x ranks x --grad-accum)";
  need.beside_data = o.cache_dir.empty();
  const std::string cache_dir = o.cache_dir.empty() ? o.save_dir + "/cache" : o.cache_dir;
  return data::load_token_blocks(o.dataset, tokenizer, o.seq_length, cache_dir,
                                 [&](const std::function<void()>& fn) { rank0_first(world, fn); }, need);
}

// One run from setup to the end; the stages below fill it in order.
struct Run {
  TrainOptions o;
  torch::Device device = torch::kCPU;
  torch::Dtype dtype = torch::kFloat32;
  ProcessGroupOptions pg;
  std::unique_ptr<World> world;
  bool rank0 = false;
  models::ModelConfig model;
  ParallelDims dims;     // the strategy's dimensions, resolved once from the flags and the world
  RunSettings settings;  // what of the options every strategy reads
  std::unique_ptr<Strategy> strategy;
  json run_config;
  int64_t global_batch = 0;
  std::unique_ptr<data::TokenBlocks> blocks;
  std::unique_ptr<data::BlockSampler> sampler;
  int64_t steps_per_epoch = 0, total_steps = 0, start_step = 0;
  std::unique_ptr<CheckpointDir> checkpoints;
  MetricsFile metrics;
  std::string metrics_path;
  HangOptions hang_env;  // the DDX_* hang variables, read once at the start
  std::unique_ptr<HangDetection> hang_detection;
  ParameterSeal seal;  // --replica-check-freq: storage without a copy, between a check's update and the next
  ProfileOptions profile;
};

// The DDX_* hang variables (docs/hangs.md), read and checked once, before anything runs, so a
// bad value is one line naming it rather than a failure mid-run or a hang that cannot be dumped.
// A variable that a flag overrides is not read at all: --on-timeout always does (it has a
// default), --collective-timeout and --trace-dir when given.
HangOptions hang_options_of_this_run(const TrainOptions& o) {
  EnvMap env = current_env();
  env.erase("DDX_ON_TIMEOUT");
  if (o.collective_timeout_s > 0) env.erase("DDX_COLLECTIVE_TIMEOUT");
  if (!o.trace_dir.empty()) env.erase("DDX_TRACE_DIR");
  HangOptions hang = hang_options_from_env(env);
  if (o.trace_dir.empty()) check_output_folder("DDX_TRACE_DIR", hang.trace_dir);
  check_output_folder("--trace-dir", o.trace_dir);
  return hang;
}

// Rendezvous, model, strategy and data, every rank agreeing on them.
void set_up(Run& run) {
  const TrainOptions& o = run.o;
  run.hang_env = hang_options_of_this_run(o);
  RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  run.device = pick_device(o.device, info.local_rank);
  run.dtype = o.dtype == "bf16" ? torch::kBFloat16 : o.dtype == "fp64" ? torch::kFloat64 : torch::kFloat32;
  if (run.dtype == torch::kBFloat16 && run.device.is_cpu()) log::warn("--dtype bf16 on CPU is slow; it is meant for GPUs");

  // The watchdog's timeout: the flag, else DDX_COLLECTIVE_TIMEOUT (docs/hangs.md: what every ddx
  // program reads), else the runtime's default: a flag default of its own would silently
  // override the variable.
  if (o.collective_timeout_s > 0) {
    run.hang_env.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.collective_timeout_s * 1000));
  }
  // Gloo's (NCCL's) own timeout comes after the watchdog's whole --on-timeout abort: the timeout,
  // the peers' state, their dumps (at most dump_wait), exit 124. So on a hang the watchdog ends
  // the rank, as it does with NCCL, not the backend's exception racing it at the same moment
  // (a lost node: the ranks left ended with SIGABRT before their watchdog's exit code).
  run.pg.collective_timeout = run.hang_env.collective_timeout + run.hang_env.dump_wait + std::chrono::seconds(10);
  run.pg.store_timeout = std::max(run.pg.collective_timeout, std::chrono::milliseconds(60000));
  run.pg.enable_nccl = run.device.is_cuda();
  run.world = World::init(info, run.pg);
  faults::install_collective_faults(run.world->rank(), run.world->size());
  run.rank0 = run.world->rank() == 0;

  run.model = models::resolve_model_config(o.model);
  models::validate(run.model);
  run.dims = resolve_parallel_dims(o.strategy, o.strategy_options, run.world->size());
  run.strategy = make_strategy(o.strategy, o.strategy_options, run.dims);
  auto tokenizer = data::load_tokenizer(o.tokenizer);
  if (tokenizer->vocab_size() > run.model.vocab_size) {
    throw UsageError("tokenizer " + o.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                     " tokens but model " + run.model.name + " only " + std::to_string(run.model.vocab_size));
  }
  run.run_config = {{"model", json::parse(run.model.to_json())}, {"seq_length", o.seq_length},
                    {"dataset", o.dataset}, {"tokenizer", tokenizer->fingerprint()}, {"seed", o.seed},
                    {"dtype", o.dtype}};
  if (o.uneven_tokens) run.run_config["uneven_tokens"] = true;  // other data: resuming without it is refused
  agree_on(*run.world, "the model configuration", run.model.hash());

  run.settings = {o.seed, o.init_from, o.weight_decay, o.fused_adamw, o.seq_length, o.grad_accum};
  StrategyContext context{run.settings, run.dims, run.model, *run.world, run.device, run.dtype};
  run.strategy->setup(context);
  // A detector this strategy cannot serve: refused, with a record naming the flag for suites
  // (the fault matrix) that asked for it.
  auto refuse = [&](const std::string& flag, const std::string& why) {
    events::Event("train.flag_refused").text("flag", flag).text("strategy", o.strategy).emit();
    throw UsageError(flag + ": --strategy " + o.strategy + why);
  };
  if (o.nan_check && run.strategy->local_parameters().empty()) {
    refuse("--nan-check", " does not expose its local parameters to the detectors yet (single, ddp, tp, 2d --dp-replicate and pp without FSDP do)");
  }
  if (o.replica_check_freq > 0 && run.strategy->owned_parameters().empty()) {
    refuse("--replica-check-freq", " does not expose its parameters to the detectors yet (single, ddp, tp, fsdp, 2d and pp do)");
  }
  run.global_batch = o.global_batch(run.strategy->dp_size());
  run.run_config["global_batch"] = run.global_batch;
  agree_on(*run.world, "the run configuration", hash_text(run.run_config.dump()));
  run.blocks = load_blocks(o, *tokenizer, *run.world, run.global_batch);
  run.sampler = std::make_unique<data::BlockSampler>(run.blocks->num_blocks(), run.global_batch, o.seed);
  run.steps_per_epoch = run.sampler->steps_per_epoch();
  run.total_steps = o.num_epochs * run.steps_per_epoch;
  if (o.max_steps > 0) run.total_steps = std::min(run.total_steps, o.max_steps);
  faults::set_rank(run.world->rank(), run.world->size(), run.total_steps);  // a fault past the last step is a usage error
}

// The experiment folder, and the step to start from (its latest checkpoint's).
std::string resume(Run& run) {
  const TrainOptions& o = run.o;
  const std::string exp_dir = o.experiment_name.empty() ? "" : o.save_dir + "/" + o.experiment_name;
  if (exp_dir.empty()) return exp_dir;
  // The experiment exists from its start, so a restart before its first checkpoint continues it
  // (validate() lets an existing --metrics-file be rewritten only for an experiment that exists).
  if (run.rank0) fs::create_directories(exp_dir);
  run.checkpoints = std::make_unique<CheckpointDir>(exp_dir);
  // A torn or corrupt newest checkpoint (checksums) falls back to the one before, loudly.
  const bool rank0 = run.rank0;
  const auto warn = [&](const std::string& why) { if (rank0) log::warn(why); };
  if (auto latest = run.checkpoints->latest_valid(run.run_config, warn, /*set_aside_corrupt=*/rank0)) {
    const auto& [folder, state] = *latest;
    run.strategy->load_state(folder);
    restore_rng_state(state.rng_state);
    run.start_step = state.step;
    log::info("resuming from ", folder, " at step ", run.start_step);
    if (rank0) events::Event("train.resumed").text("folder", folder).number("step", run.start_step).emit();
  }
  return exp_dir;
}

void open_metrics(Run& run, const std::string& exp_dir) {
  const TrainOptions& o = run.o;
  run.metrics_path = o.metrics_file;
  if (run.metrics_path.empty()) {
    run.metrics_path = exp_dir.empty() ? o.save_dir + "/runs/" + timestamp() + "-" + std::to_string(::getpid()) + "/metrics.jsonl"
                                       : exp_dir + "/metrics.jsonl";
  }
  if (run.rank0) {
    const fs::path parent = fs::path(run.metrics_path).parent_path();
    fs::create_directories(parent.empty() ? "." : parent);
    run.metrics.open(run.metrics_path, run.start_step > 0 ? run.start_step : -1);
  }
}

// Every collective is recorded; a hang ends in per-rank dumps and a verdict (docs/hangs.md).
void install_hang_detection(Run& run) {
  const TrainOptions& o = run.o;
  HangOptions hang_options = run.hang_env;
  // --trace-dir, else DDX_TRACE_DIR (read at the start), else next to the metrics.
  if (!o.trace_dir.empty()) hang_options.trace_dir = o.trace_dir;
  if (hang_options.trace_dir.empty()) hang_options.trace_dir = (fs::path(run.metrics_path).parent_path() / "traces").string();
  hang_options.on_timeout = o.on_timeout == "dump" ? OnTimeout::Dump : o.on_timeout == "wait" ? OnTimeout::Wait : OnTimeout::Abort;
  hang_options.check_collectives = hang_options.check_collectives || o.check_collectives;
  hang_options.dump_on_sigterm = false;  // SIGTERM means "checkpoint and stop" here
  run.hang_detection = HangDetection::install(*run.world, hang_options);
  if (run.rank0 && run.world->size() > 1) announce_job(run.world->info(), run.metrics_path);  // for `ddx top --run`
}

// This rank's micro-batches of one step and the step's global token count.
struct StepBatch {
  std::vector<MicroBatch> micro;
  int64_t local_tokens = 0;
  int64_t global_tokens = 0;
};

StepBatch load_step_batch(Run& run, int64_t epoch, int64_t step_in_epoch, PhaseTimes& times) {
  const TrainOptions& o = run.o;
  const int dp = run.strategy->dp_size(), dp_rank = run.strategy->dp_rank();
  StepBatch batch;
  {
    // Micro-step m covers positions [m*b*dp, (m+1)*b*dp) of the global batch, split among
    // data-parallel ranks in rank order.
    PhaseTimer t(times.data, run.device, profile_scope::kData);
    const std::vector<int64_t> ids = run.sampler->global_batch(epoch, step_in_epoch);
    for (int64_t m = 0; m < o.grad_accum; ++m) {
      const int64_t begin = m * o.batch_size * dp + dp_rank * o.batch_size;
      std::vector<int64_t> mine(ids.begin() + begin, ids.begin() + begin + o.batch_size);
      batch.micro.push_back(load_micro_batch(*run.blocks, mine, begin, run.device, o.uneven_tokens));
      batch.local_tokens += batch.micro.back().labels.ne(-100).sum().item<int64_t>();
    }
  }
  // The loss of a step is the sum of token losses over the global batch divided by its
  // token count (parallelism.md §1): one SUM of the counts before forward.
  batch.global_tokens = batch.local_tokens;
  if (Group* g = run.strategy->dp_group()) {
    auto count = torch::tensor({batch.local_tokens}, torch::kInt64);
    RECORD_USER_SCOPE(profile_scope::kCommWait);
    const auto t_wait = std::chrono::steady_clock::now();
    all_reduce(*g, count).wait();
    // Waiting here is waiting for the slowest rank to start its step: comm wait, not work.
    times.comm_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
    batch.global_tokens = count.item<int64_t>();
  }
  return batch;
}

// What one optimizer step gives the rest of the loop.
struct StepResult {
  double loss = 0, grad_norm = 0;
  bool stop = false, checkpoint_now = false;
  bool update_skipped = false;  // --nan-check --on-nan skip dropped this step's gradients
};

StepResult train_step(Run& run, const StepBatch& batch, int64_t step, double lr, PhaseTimes& times) {
  const TrainOptions& o = run.o;
  double loss_scale = 1.0 / static_cast<double>(batch.global_tokens);
  if (planted_bugs().local_mean) {
    loss_scale = 1.0 / (static_cast<double>(batch.local_tokens) * run.strategy->dp_size());  // the bug, on purpose
  }
  loss_scale *= faults::gradient_factor();  // NaN/Inf when a nan fault fires here
  double local_loss_sum = 0;
  {
    CallSite site("step " + std::to_string(step + 1));
    local_loss_sum = run.strategy->run_batch(batch.micro, loss_scale, times);
  }
  StepResult result;
  {
    CallSite site("step " + std::to_string(step + 1) + " update");
    Strategy& strategy = *run.strategy;
    // Local gradients, before finish_gradients replaces them with the reduced ones.
    const std::string non_finite = o.nan_check ? check_gradients_finite(strategy, run.world->world(), step + 1) : "";
    {
      RECORD_USER_SCOPE(profile_scope::kCommWait);
      times.comm_wait += strategy.finish_gradients();
    }
    PhaseTimer t(times.update, run.device, profile_scope::kOptimizer);
    if (!non_finite.empty() && o.on_nan == "stop") throw std::runtime_error("nan-check: " + non_finite + "; stopping (--on-nan stop)");
    if (!non_finite.empty()) {
      if (run.rank0) log::warn("nan-check: ", non_finite, "; the step's update is skipped (--on-nan skip)");
      drop_gradients(strategy);
      result.update_skipped = true;
      result.grad_norm = std::numeric_limits<double>::quiet_NaN();
    } else {
      if (run.seal.pending()) {  // storage without a copy, as the last check step's update left it
        const std::string changed = run.seal.verify(strategy, run.world->world(), step + 1);
        if (!changed.empty()) throw std::runtime_error("replica-check: " + changed + "; stopping");
      }
      // The gradients the optimizer is about to use: the parity suite compares them where
      // rounding is the only difference between layouts (step 1: identical weights).
      if (!o.grads_file.empty() && step + 1 == o.grads_step) {
        auto grads = strategy.full_gradients();
        if (run.rank0) write_model_file(o.grads_file, grads);
      }
      result.grad_norm = strategy.optimizer_step(lr, o.max_grad_norm);
    }
    const bool check_step = o.replica_check_freq > 0 && (step + 1) % o.replica_check_freq == 0;
    if (check_step) run.seal.record(strategy, step + 1);
    // bitflip: after the update (and its seal), into the weights
    std::vector<std::pair<std::string, torch::Tensor>> owned;
    for (auto& p : strategy.owned_parameters()) owned.emplace_back(p.name, p.tensor);
    faults::inject_parameter_faults(owned);
    if (check_step) {
      const std::string diverged = check_replicas(strategy, run.world->world(), step + 1);
      if (!diverged.empty()) throw std::runtime_error("replica-check: " + diverged + "; stopping");
    }
  }
  // Loss and the preemption flags, agreed by every rank in one small all-reduce.
  auto agreed = torch::tensor({local_loss_sum, static_cast<double>(g_stop_requested),
                               static_cast<double>(g_checkpoint_requested)}, torch::kFloat64);
  // Blocking here is waiting for the slowest rank: comm wait (ddx top and the straggler watch read it).
  double loss_sum = local_loss_sum;
  {
    RECORD_USER_SCOPE(profile_scope::kCommWait);
    const auto t_wait = std::chrono::steady_clock::now();
    all_reduce(run.world->world(), agreed).wait();
    if (run.strategy->dp_group()) {
      // Other mesh dimensions hold copies of the same loss: take the data-parallel sum.
      auto l = torch::tensor({local_loss_sum}, torch::kFloat64);
      all_reduce(*run.strategy->dp_group(), l).wait();
      loss_sum = l.item<double>();
    }
    times.comm_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
  }
  result.stop = agreed[1].item<double>() > 0;
  result.checkpoint_now = agreed[2].item<double>() > 0;
  g_checkpoint_requested = 0;
  result.loss = loss_sum / static_cast<double>(batch.global_tokens);
  return result;
}

// One metrics record (rank 0 writes it; every rank takes part in the straggler all-gather).
struct StepRecord {
  int64_t done = 0, epoch = 0;
  double loss = 0, loss_avg = 0, lr = 0, grad_norm = 0, step_s = 0, tokens_per_s = 0;
  std::string checksum;
  bool update_skipped = false;
  CommCounts comm;  // what the step's collectives moved, from its data to its update (docs/tp.md)
};

// {"tp": {"all_reduce": {"calls": 10, "bytes": 368640}, ...}, "world": {...}}
json comm_json(const CommCounts& counts) {
  json out = json::object();
  for (const auto& [label, per_op] : counts) {
    for (const auto& [op, c] : per_op) out[label][op] = {{"calls", c.calls}, {"bytes", c.bytes}};
  }
  return out;
}

void record_step(Run& run, const StepRecord& s, const PhaseTimes& times, StragglerWatch& stragglers) {
  // The straggler view: every rank's step and comm-wait time, the slowest named.
  World& world = *run.world;
  auto mine = torch::tensor({s.step_s, times.comm_wait}, torch::kFloat64);
  auto all = torch::zeros({world.size() * 2}, torch::kFloat64);
  all_gather(world.world(), all, mine).wait();
  int slowest = 0;
  std::vector<double> busy_s(world.size());
  for (int r = 0; r < world.size(); ++r) {
    if (all[2 * r].item<double>() > all[2 * slowest].item<double>()) slowest = r;
    busy_s[r] = all[2 * r].item<double>() - all[2 * r + 1].item<double>();
  }
  const double now_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const std::string straggler = stragglers.observe(s.done, busy_s, now_s);
  if (run.rank0 && !straggler.empty()) log::warn(straggler);
  if (!run.rank0) return;
  const HostMemory host = host_memory();
  const MemoryAccounting mem = run.strategy->memory();
  const int64_t tokens = run.global_batch * run.o.seq_length;
  json record = {{"step", s.done}, {"epoch", s.epoch}, {"loss", s.loss},
                 {"loss_avg", s.loss_avg}, {"lr", s.lr},
                 {"grad_norm", s.grad_norm}, {"tokens", tokens},
                 {"tokens_per_s", s.tokens_per_s}, {"step_ms", s.step_s * 1e3},
                 {"data_ms", times.data * 1e3}, {"forward_ms", times.forward * 1e3},
                 {"backward_ms", times.backward * 1e3}, {"update_ms", times.update * 1e3},
                 {"comm_wait_ms", times.comm_wait * 1e3}, {"slowest_rank", slowest},
                 {"slowest_step_ms", all[2 * slowest].item<double>() * 1e3},
                 {"rss_bytes", host.rss_bytes}, {"peak_rss_bytes", host.peak_rss_bytes},
                 {"param_bytes", mem.parameter_bytes}, {"grad_bytes", mem.gradient_bytes},
                 {"optimizer_bytes", mem.optimizer_bytes}, {"unsharded_peak_bytes", mem.unsharded_peak_bytes},
                 {"world_size", world.size()}, {"strategy", run.o.strategy},
                 {"comm_bytes", total_bytes(s.comm)}, {"comm", comm_json(s.comm)}};
  if (!s.checksum.empty()) record["param_checksum"] = s.checksum;
  if (auto injected = faults::report_entry(); !injected.empty()) record["injected_faults"] = injected;
  if (s.update_skipped) record["update_skipped"] = true;
  // Model FLOPs utilisation: 6 FLOPs per parameter per token (forward + backward),
  // against the device's dense peak; GPU only.
  if (auto peak = peak_flops(run.device, run.dtype)) {
    record["mfu"] = 6.0 * static_cast<double>(run.model.num_parameters()) * s.tokens_per_s /
                    (*peak * static_cast<double>(world.size()));
  } else {
    record["mfu"] = nullptr;
  }
  if (auto gpu = gpu_memory(run.device)) {
    record["gpu_allocated_bytes"] = gpu->allocated_bytes;
    record["gpu_peak_allocated_bytes"] = gpu->peak_allocated_bytes;
    record["gpu_reserved_bytes"] = gpu->reserved_bytes;
    record["gpu_peak_reserved_bytes"] = gpu->peak_reserved_bytes;
    reset_gpu_peaks(run.device);
  }
  for (const auto& [key, value] : run.strategy->step_stats()) record[key] = value;
  run.metrics.append(record);
  if (run.rank0) events::Event("train.step").number("step", s.done).emit();
  if (!progress_enabled_on_terminal(run.o.progress)) {
    log::info("step ", s.done, "/", run.total_steps, " loss ", s.loss, " lr ", s.lr, " grad_norm ", s.grad_norm, " ",
              static_cast<int64_t>(s.tokens_per_s), " tok/s");
  }
}

// Every rank writes its part into the staging folder; rank 0 commits it.
void save_checkpoint(Run& run, int64_t done) {
  World& world = *run.world;
  const std::string staging = run.checkpoints->staging_folder(done);
  if (run.rank0) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    fs::create_directories(staging);
  }
  barrier(world.world()).wait();
  run.strategy->save_state(staging);
  faults::during_checkpoint(staging);  // ckpt-torn, disk-full: before the checkpoint is complete
  barrier(world.world()).wait();
  if (run.rank0) {
    TrainerState state{done, done / run.steps_per_epoch, done % run.steps_per_epoch, rng_state_hex(), run.run_config};
    const std::string folder = run.checkpoints->commit(done, state, static_cast<int>(run.o.keep_checkpoints));
    log::info("checkpoint ", folder);
    events::Event("checkpoint.saved").text("folder", folder).number("step", done).emit();
    faults::after_checkpoint(folder);  // ckpt-corrupt: bytes of the newest checkpoint changed
  }
  barrier(world.world()).wait();
}

// --profile: the window of steps after the first (which allocates the optimizer state), or
// all of them in a run too short for that.
std::unique_ptr<StepProfiler> make_profiler(const Run& run) {
  const TrainOptions& o = run.o;
  if (run.profile.target.empty()) return nullptr;
  const int64_t steps = run.total_steps - run.start_step;
  const int64_t first = run.start_step + (steps > run.profile.steps ? 1 : 0);
  const int64_t count = std::min(run.profile.steps, run.total_steps - first);
  const std::string title = "ddx train --profile: " + run.model.name + ", --strategy " + o.strategy + ", rank " +
                            std::to_string(run.world->rank()) + " of " + std::to_string(run.world->size()) + ", " +
                            std::to_string(o.batch_size) + " x " + std::to_string(o.seq_length) + " tokens, steps " +
                            std::to_string(first + 1) + "-" + std::to_string(first + count) + ", " +
                            std::to_string(at::get_num_threads()) + " threads, " + run.device.str();
  return std::make_unique<StepProfiler>(run.profile.target, title, run.world->rank(), run.world->size(), run.device.is_cuda(),
                                        first, count);
}

// The loop; returns the last step's loss.
double train_loop(Run& run) {
  const TrainOptions& o = run.o;
  std::unique_ptr<StepProfiler> profiler = make_profiler(run);
  ProgressBar progress(run.total_steps, o.progress && run.rank0);
  StragglerWatch stragglers(o.straggler_factor, kStragglerMinSteps, o.straggler_window_s);
  TopProgress top_progress(run.hang_detection->watchdog(), run.total_steps);
  double window_loss = 0, last_loss = 0;
  int64_t window_steps = 0;
  for (int64_t step = run.start_step; step < run.total_steps; ++step) {
    const auto t_step = std::chrono::steady_clock::now();
    faults::at_step(step + 1);  // the injection point of process and compute faults (a straggler's sleep counts)
    const int64_t epoch = step / run.steps_per_epoch, step_in_epoch = step % run.steps_per_epoch;
    const double lr = learning_rate(step, o.lr, o.warmup_steps, o.lr_decay_steps);
    PhaseTimes times;
    StepResult result;
    int64_t local_tokens = 0;
    if (profiler) profiler->before_step(step);
    const CommCounts comm_before = comm_counts();
    {
      RECORD_USER_SCOPE(profile_scope::kStep);
      StepBatch batch = load_step_batch(run, epoch, step_in_epoch, times);
      local_tokens = batch.local_tokens;
      result = train_step(run, batch, step, lr, times);
    }
    const CommCounts step_comm = comm_counts_since(comm_before, comm_counts());
    if (profiler) profiler->after_step(step);
    last_loss = result.loss;
    window_loss += result.loss;
    ++window_steps;
    StepRecord record;
    record.done = step + 1;
    record.epoch = epoch;
    record.loss = result.loss;
    record.lr = lr;
    record.grad_norm = result.grad_norm;
    record.update_skipped = result.update_skipped;
    record.comm = step_comm;
    record.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
    record.tokens_per_s = static_cast<double>(run.global_batch * o.seq_length) / record.step_s;
    const int64_t done = record.done;
    progress.update(done, result.loss, record.tokens_per_s);
    top_progress.step_done(done, local_tokens, record.step_s, times.comm_wait);

    const bool last = done == run.total_steps || result.stop;
    const bool want_checksum = o.checksum_freq > 0 && done % o.checksum_freq == 0;
    if (want_checksum || last) record.checksum = parameter_checksum(*run.strategy);
    if (done % o.log_freq == 0 || last || want_checksum) {
      record.loss_avg = window_loss / static_cast<double>(window_steps);
      record_step(run, record, times, stragglers);
      window_loss = 0;
      window_steps = 0;
    }
    if (run.checkpoints && (done % o.ckpt_freq == 0 || last || result.checkpoint_now)) save_checkpoint(run, done);
    if (result.stop) {
      log::warn("stopping after step ", done, " on SIGTERM", run.checkpoints ? " (checkpoint written)" : "");
      break;
    }
  }
  if (profiler) profiler->finish();
  progress.finish();
  return last_loss;
}

// Final weights, the loss plot, and the world shut down. Returns the exit code: 1 when the
// rendezvous store went away during the run (the work is saved, but the job is not clean).
int finish(Run& run, double last_loss) {
  const TrainOptions& o = run.o;
  if (!o.final_weights.empty()) {
    auto params = run.strategy->full_parameters();
    if (run.rank0) write_model_file(o.final_weights, params);
  }
  if (run.rank0) {
    const std::string plot = loss_plot_path(o, run.metrics_path);
    write_loss_plot(run.metrics_path, plot,
                    run.model.name + " · " + o.strategy + " · " + std::to_string(run.world->size()) + " rank(s)");
    if (run.start_step >= run.total_steps) {
      // A finished run started again: no step ran, so there is no loss of this run to report.
      log::info("done: the checkpoint is already at step ", run.start_step, " of ", run.total_steps,
                ", nothing to train (raise --max-steps to go on); metrics ", run.metrics_path, "; loss curve ", plot);
    } else {
      log::info("done: final loss ", last_loss, "; metrics ", run.metrics_path, "; loss curve ", plot);
    }
  }
  run.hang_detection.reset();  // before the store goes away
  try {
    run.world->shutdown();
  } catch (const StoreLost& e) {
    // Noticed at the check-out, not caused there: one line and no stack, as the watchdog says it.
    write_error_report(e.what(), 1, /*with_stack=*/false);
    return 1;
  }
  return 0;
}

}  // namespace

int run_training(TrainOptions o, const ProfileOptions& profile) {
  validate(o);
  Run run;
  run.o = std::move(o);
  run.profile = profile;
  set_up(run);
  const std::string exp_dir = resume(run);
  open_metrics(run, exp_dir);
  install_hang_detection(run);
  auto previous_term = std::signal(SIGTERM, on_preempt_signal);
  auto previous_usr1 = std::signal(SIGUSR1, on_preempt_signal);
  if (run.rank0) {
    log::info("training ", run.model.name, " (", run.model.num_parameters(), " parameters) with --strategy ",
              run.o.strategy, " on ", run.world->size(), " rank(s), ", run.device.str(), ", global batch ",
              run.global_batch, " x ", run.o.seq_length, " tokens, ", run.total_steps, " steps (",
              run.steps_per_epoch, " per epoch), ", run.world->cpu_threads().count, " CPU thread(s) per rank (",
              run.world->cpu_threads().reason, ")");
  }
  const double last_loss = train_loop(run);
  std::signal(SIGTERM, previous_term);
  std::signal(SIGUSR1, previous_usr1);
  return finish(run, last_loss);
}

}  // namespace ddx::train
