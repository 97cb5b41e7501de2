#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "ddx/checksum.h"
#include "ddx/collectives.h"
#include "ddx/env.h"
#include "ddx/error_report.h"
#include "ddx/errors.h"
#include "ddx/hang_detection.h"
#include "ddx/log.h"
#include "ddx/rendezvous.h"
#include "ddx/test_perturbation.h"
#include "models/causal_lm.h"
#include "train/checkpoint.h"
#include "train/gpu_stats.h"
#include "train/loss_plot.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/phase_timer.h"
#include "train/progress_bar.h"
#include "train/state_files.h"
#include "train/top_progress.h"
#include "train/strategy.h"
#include "train/test_breaks.h"

namespace ddx::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
// into tensors on `device`.
MicroBatch load_micro_batch(const data::TokenBlocks& blocks, const std::vector<int64_t>& block_ids,
                            int64_t first_position, torch::Device device) {
  const int64_t b = static_cast<int64_t>(block_ids.size()), T = blocks.seq_length();
  auto raw = torch::empty({b, T + 1}, torch::kInt32);
  for (int64_t i = 0; i < b; ++i) blocks.block(block_ids[i], raw.data_ptr<int32_t>() + i * (T + 1));
  auto tokens = raw.to(torch::kInt64);
  MicroBatch mb;
  // clone(), not contiguous(): with one row the narrowed views already count as contiguous and
  // would share storage, so masking labels would rewrite inputs.
  mb.inputs = tokens.narrow(1, 0, T).clone();
  mb.labels = tokens.narrow(1, 1, T).clone();
  if (test_breaks().uneven_tokens) {
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

}  // namespace

int run_training(TrainOptions o) {
  validate(o);
  RendezvousInfo info = resolve_rendezvous(current_env());
  log::set_rank(info.rank, info.world_size);
  set_error_report_rank(info.rank, info.local_rank, info.world_size);
  const torch::Device device = pick_device(o.device, info.local_rank);
  const torch::Dtype dtype = o.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  if (dtype == torch::kBFloat16 && device.is_cpu()) log::warn("--dtype bf16 on CPU is slow; it is meant for GPUs");

  ProcessGroupOptions pg;
  pg.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.collective_timeout_s * 1000));
  pg.store_timeout = std::max(pg.collective_timeout, std::chrono::milliseconds(60000));
  pg.enable_nccl = device.is_cuda();
  auto world = World::init(info, pg);
  install_test_perturbations(world->rank());
  const bool rank0 = world->rank() == 0;

  models::ModelConfig model = models::resolve_model_config(o.model);
  models::validate(model);
  auto strategy = make_strategy(o.strategy);
  auto tokenizer = data::load_tokenizer(o.tokenizer);
  if (tokenizer->vocab_size() > model.vocab_size) {
    throw UsageError("tokenizer " + o.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                     " tokens but model " + model.name + " only " + std::to_string(model.vocab_size));
  }
  json run_config = {{"model", json::parse(model.to_json())}, {"seq_length", o.seq_length},
                     {"dataset", o.dataset}, {"tokenizer", tokenizer->fingerprint()}, {"seed", o.seed},
                     {"dtype", o.dtype}};
  agree_on(*world, "the model configuration", model.hash());

  StrategyContext context{o, model, *world, device, dtype};
  strategy->setup(context);
  const int dp = strategy->dp_size(), dp_rank = strategy->dp_rank();
  const int64_t global_batch = o.global_batch(dp);
  run_config["global_batch"] = global_batch;
  agree_on(*world, "the run configuration", hash_text(run_config.dump()));
  auto blocks = load_blocks(o, *tokenizer, *world, global_batch);
  data::BlockSampler sampler(blocks->num_blocks(), global_batch, o.seed);
  const int64_t steps_per_epoch = sampler.steps_per_epoch();
  int64_t total_steps = o.num_epochs * steps_per_epoch;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);

  // Experiment folder, resume.
  const std::string exp_dir = o.experiment_name.empty() ? "" : o.save_dir + "/" + o.experiment_name;
  std::unique_ptr<CheckpointDir> checkpoints;
  int64_t start_step = 0;
  if (!exp_dir.empty()) {
    checkpoints = std::make_unique<CheckpointDir>(exp_dir);
    if (auto latest = checkpoints->latest()) {
      TrainerState state = checkpoints->verify(*latest, run_config);
      strategy->load_state(*latest);
      restore_rng_state(state.rng_state);
      start_step = state.step;
      log::info("resuming from ", *latest, " at step ", start_step);
    }
  }
  MetricsFile metrics;
  std::string metrics_path = o.metrics_file;
  if (metrics_path.empty()) {
    metrics_path = exp_dir.empty() ? o.save_dir + "/runs/" + timestamp() + "-" + std::to_string(::getpid()) + "/metrics.jsonl"
                                   : exp_dir + "/metrics.jsonl";
  }
  if (rank0) {
    fs::create_directories(fs::path(metrics_path).parent_path().empty() ? "." : fs::path(metrics_path).parent_path());
    metrics.open(metrics_path, start_step > 0 ? start_step : -1);
  }

  // Every collective is recorded; a hang ends in per-rank dumps and a verdict (docs/hangs.md).
  HangOptions hang_options = hang_options_from_env(current_env());
  hang_options.collective_timeout = pg.collective_timeout;
  hang_options.trace_dir = !o.trace_dir.empty() ? o.trace_dir
                           : (fs::path(metrics_path).parent_path() / "traces").string();
  hang_options.on_timeout = o.on_timeout == "dump" ? OnTimeout::Dump : o.on_timeout == "wait" ? OnTimeout::Wait : OnTimeout::Abort;
  hang_options.check_collectives = hang_options.check_collectives || o.check_collectives;
  hang_options.dump_on_sigterm = false;  // SIGTERM means "checkpoint and stop" here
  auto hang_detection = HangDetection::install(*world, hang_options);
  if (rank0 && world->size() > 1) announce_job(world->info(), metrics_path);  // for `ddx top --run`

  auto previous_term = std::signal(SIGTERM, on_preempt_signal);
  auto previous_usr1 = std::signal(SIGUSR1, on_preempt_signal);
  if (rank0) {
    log::info("training ", model.name, " (", model.num_parameters(), " parameters) with --strategy ", o.strategy,
              " on ", world->size(), " rank(s), ", device.str(), ", global batch ", global_batch, " x ",
              o.seq_length, " tokens, ", total_steps, " steps (", steps_per_epoch, " per epoch)");
  }

  ProgressBar progress(total_steps, o.progress && rank0);
  TopProgress top_progress(hang_detection->watchdog(), total_steps);
  double window_loss = 0;
  int64_t window_steps = 0;
  double last_loss = 0;
  for (int64_t step = start_step; step < total_steps; ++step) {
    const auto t_step = std::chrono::steady_clock::now();
    const int64_t epoch = step / steps_per_epoch, step_in_epoch = step % steps_per_epoch;
    const double lr = learning_rate(step, o.lr, o.warmup_steps, o.lr_decay_steps);
    PhaseTimes times;
    double blocked_s = 0;  // in the loop's own blocking collectives (comm wait for `ddx top`)
    auto wait_timed = [&blocked_s](Work work) {
      const auto t0 = std::chrono::steady_clock::now();
      work.wait();
      blocked_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };

    // This rank's micro-batches: micro-step m covers positions [m*b*dp, (m+1)*b*dp) of the
    // global batch, split among data-parallel ranks in rank order.
    std::vector<MicroBatch> micro;
    int64_t local_tokens = 0;
    {
      PhaseTimer t(times.data, device);
      const std::vector<int64_t> ids = sampler.global_batch(epoch, step_in_epoch);
      for (int64_t m = 0; m < o.grad_accum; ++m) {
        const int64_t begin = m * o.batch_size * dp + dp_rank * o.batch_size;
        std::vector<int64_t> mine(ids.begin() + begin, ids.begin() + begin + o.batch_size);
        micro.push_back(load_micro_batch(*blocks, mine, begin, device));
        local_tokens += micro.back().labels.ne(-100).sum().item<int64_t>();
      }
    }
    // The loss of a step is the sum of token losses over the global batch divided by its
    // token count (parallelism.md §1): one SUM of the counts before forward.
    int64_t global_tokens = local_tokens;
    if (Group* g = strategy->dp_group()) {
      auto count = torch::tensor({local_tokens}, torch::kInt64);
      wait_timed(all_reduce(*g, count));
      global_tokens = count.item<int64_t>();
    }
    double loss_scale = 1.0 / static_cast<double>(global_tokens);
    if (test_breaks().local_mean) loss_scale = 1.0 / (static_cast<double>(local_tokens) * dp);  // the bug, on purpose
    double local_loss_sum = 0;
    for (int64_t m = 0; m < o.grad_accum; ++m) {
      CallSite site("step " + std::to_string(step + 1) + " micro " + std::to_string(m));
      local_loss_sum += strategy->forward_backward(micro[m], loss_scale, m == o.grad_accum - 1, times);
    }
    micro.clear();
    double grad_norm = 0;
    {
      CallSite site("step " + std::to_string(step + 1) + " update");
      times.comm_wait += strategy->finish_gradients();
      PhaseTimer t(times.update, device);
      grad_norm = strategy->optimizer_step(lr, o.max_grad_norm);
    }
    // Loss and the preemption flags, agreed by every rank in one small all-reduce.
    auto agreed = torch::tensor({local_loss_sum, static_cast<double>(g_stop_requested),
                                 static_cast<double>(g_checkpoint_requested)}, torch::kFloat64);
    wait_timed(all_reduce(world->world(), agreed));
    double loss_sum = local_loss_sum;
    if (strategy->dp_group()) {
      // Other mesh dimensions hold copies of the same loss: take the data-parallel sum.
      auto l = torch::tensor({local_loss_sum}, torch::kFloat64);
      wait_timed(all_reduce(*strategy->dp_group(), l));
      loss_sum = l.item<double>();
    }
    const bool stop = agreed[1].item<double>() > 0;
    const bool checkpoint_now = agreed[2].item<double>() > 0;
    g_checkpoint_requested = 0;
    const double loss = loss_sum / static_cast<double>(global_tokens);
    last_loss = loss;
    window_loss += loss;
    ++window_steps;
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
    const double tokens_per_s = static_cast<double>(global_batch * o.seq_length) / step_s;
    const int64_t done = step + 1;
    progress.update(done, loss, tokens_per_s);
    top_progress.step_done(done, local_tokens, step_s, times.comm_wait + blocked_s);

    const bool last = done == total_steps || stop;
    const bool want_checksum = o.checksum_freq > 0 && done % o.checksum_freq == 0;
    std::string checksum;
    if (want_checksum || last) checksum = parameter_checksum(*strategy);
    if (done % o.log_freq == 0 || last || want_checksum) {
      // The straggler view: every rank's step and comm-wait time, the slowest named.
      auto mine = torch::tensor({step_s, times.comm_wait}, torch::kFloat64);
      auto all = torch::zeros({world->size() * 2}, torch::kFloat64);
      all_gather(world->world(), all, mine).wait();
      int slowest = 0;
      for (int r = 1; r < world->size(); ++r) {
        if (all[2 * r].item<double>() > all[2 * slowest].item<double>()) slowest = r;
      }
      if (rank0) {
        const HostMemory host = host_memory();
        const MemoryAccounting mem = strategy->memory();
        json record = {{"step", done}, {"epoch", epoch}, {"loss", loss},
                       {"loss_avg", window_loss / static_cast<double>(window_steps)}, {"lr", lr},
                       {"grad_norm", grad_norm}, {"tokens", global_batch * o.seq_length},
                       {"tokens_per_s", tokens_per_s}, {"step_ms", step_s * 1e3},
                       {"data_ms", times.data * 1e3}, {"forward_ms", times.forward * 1e3},
                       {"backward_ms", times.backward * 1e3}, {"update_ms", times.update * 1e3},
                       {"comm_wait_ms", times.comm_wait * 1e3}, {"slowest_rank", slowest},
                       {"slowest_step_ms", all[2 * slowest].item<double>() * 1e3},
                       {"rss_bytes", host.rss_bytes}, {"peak_rss_bytes", host.peak_rss_bytes},
                       {"param_bytes", mem.parameter_bytes}, {"grad_bytes", mem.gradient_bytes},
                       {"optimizer_bytes", mem.optimizer_bytes}, {"unsharded_peak_bytes", mem.unsharded_peak_bytes},
                       {"world_size", world->size()}, {"strategy", o.strategy}};
        if (!checksum.empty()) record["param_checksum"] = checksum;
        // Model FLOPs utilisation: 6 FLOPs per parameter per token (forward + backward),
        // against the device's dense peak; GPU only.
        if (auto peak = peak_flops(device, dtype)) {
          record["mfu"] = 6.0 * static_cast<double>(model.num_parameters()) * tokens_per_s /
                          (*peak * static_cast<double>(world->size()));
        } else {
          record["mfu"] = nullptr;
        }
        if (auto gpu = gpu_memory(device)) {
          record["gpu_allocated_bytes"] = gpu->allocated_bytes;
          record["gpu_peak_allocated_bytes"] = gpu->peak_allocated_bytes;
          record["gpu_reserved_bytes"] = gpu->reserved_bytes;
          record["gpu_peak_reserved_bytes"] = gpu->peak_reserved_bytes;
          reset_gpu_peaks(device);
        }
        for (const auto& [key, value] : strategy->step_stats()) record[key] = value;
        metrics.append(record);
        if (!progress_enabled_on_terminal(o.progress)) {
          log::info("step ", done, "/", total_steps, " loss ", loss, " lr ", lr, " grad_norm ", grad_norm, " ",
                    static_cast<int64_t>(tokens_per_s), " tok/s");
        }
      }
      window_loss = 0;
      window_steps = 0;
    }
    if (checkpoints && (done % o.ckpt_freq == 0 || last || checkpoint_now)) {
      const std::string staging = checkpoints->staging_folder(done);
      if (rank0) {
        std::error_code ec;
        fs::remove_all(staging, ec);
        fs::create_directories(staging);
      }
      barrier(world->world()).wait();
      strategy->save_state(staging);
      barrier(world->world()).wait();
      if (rank0) {
        TrainerState state{done, done / steps_per_epoch, done % steps_per_epoch, rng_state_hex(), run_config};
        const std::string folder = checkpoints->commit(done, state, static_cast<int>(o.keep_checkpoints));
        log::info("checkpoint ", folder);
      }
      barrier(world->world()).wait();
    }
    if (stop) {
      log::warn("stopping after step ", done, " on SIGTERM", checkpoints ? " (checkpoint written)" : "");
      break;
    }
  }
  progress.finish();
  std::signal(SIGTERM, previous_term);
  std::signal(SIGUSR1, previous_usr1);

  if (!o.final_weights.empty()) {
    auto params = strategy->full_parameters();
    if (rank0) write_model_file(o.final_weights, params);
  }
  if (rank0) {
    const std::string plot = o.plot_file.empty() ? (fs::path(metrics_path).parent_path() / "loss.svg").string() : o.plot_file;
    write_loss_plot(metrics_path, plot, model.name + " · " + o.strategy + " · " + std::to_string(world->size()) + " rank(s)");
    log::info("done: final loss ", last_loss, "; metrics ", metrics_path, "; loss curve ", plot);
  }
  hang_detection.reset();  // before the store goes away
  world->shutdown();
  return 0;
}

}  // namespace ddx::train
