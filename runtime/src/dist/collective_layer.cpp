// The interposition point of the collective layer: numbering, records, call and byte
// counters (comm_counters.h), observers, hooks, completion tracking and error wrapping, shared
// by every op in collectives.cpp.
#include "collective_layer.h"

#include "ddx/collective_filter.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>

#include "ddx/watchdog/comm_counters.h"

namespace ddx {

struct Work::State {
  std::mutex mutex;
  OpRecord record;  // guarded by mutex
  c10::intrusive_ptr<c10d::Work> work;
  std::function<void()> finish;
  std::vector<at::Tensor> outputs;
  c10::DeviceType device = c10::DeviceType::CPU;
  bool has_future = false;
  bool waited = false;
  std::shared_ptr<std::atomic<int>> pending;
};

namespace {

std::atomic<uint64_t> g_next_id{0};
thread_local std::string t_call_site;

std::mutex g_hooks_mutex;
std::vector<CollectiveHook*> g_hooks;
std::atomic<LeaveOutFilter> g_leave_out{nullptr};  // ddx/collective_filter.h

std::vector<CollectiveHook*> hooks() {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  return g_hooks;
}

std::string describe(const OpRecord& r) {
  std::ostringstream out;
  out << to_string(r.op);
  if (!r.reduce_op.empty()) out << "(" << r.reduce_op << ")";
  out << (r.p2p ? " p2p#" : " #") << r.seq << " on group " << r.group << " (" << r.backend
      << ", " << r.dtype << ", " << r.numel << " elements";
  if (r.peer >= 0) out << ", " << (r.p2p ? "peer " : "root ") << r.peer;
  if (!r.call_site.empty()) out << ", at " << r.call_site;
  out << ")";
  return out.str();
}

// Marks the op finished once (the future callback and wait() may both get here).
void mark_end(const std::shared_ptr<Work::State>& state, const std::string& error) {
  OpRecord snapshot;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->record.state == OpState::Completed || state->record.state == OpState::Failed) return;
    state->record.t_end_us = steady_now_us();
    state->record.state = error.empty() ? OpState::Completed : OpState::Failed;
    state->record.error = error;
    snapshot = state->record;
  }
  state->pending->fetch_sub(1);
  notify_end(snapshot);
}

void fill_common(Group& group, OpRecord& r) {
  r.id = ++g_next_id;
  r.group = group.name();
  r.group_ranks = group.global_ranks();
  r.seq = r.p2p ? group.next_p2p_seq() : group.next_seq();
  r.call_site = t_call_site;
  r.t_enqueue_us = steady_now_us();
  r.state = OpState::Scheduled;
}

}  // namespace

CallSite::CallSite(std::string label) : previous_(std::move(t_call_site)) {
  t_call_site = std::move(label);
}
CallSite::~CallSite() { t_call_site = std::move(previous_); }
const std::string& CallSite::current() { return t_call_site; }

void set_leave_out_filter(LeaveOutFilter filter) { g_leave_out.store(filter); }

void add_collective_hook(CollectiveHook* hook) {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  g_hooks.push_back(hook);
}
void remove_collective_hook(CollectiveHook* hook) {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  g_hooks.erase(std::remove(g_hooks.begin(), g_hooks.end(), hook), g_hooks.end());
}

void Work::wait() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->waited) return;
  }
  try {
    state_->work->wait();
  } catch (const std::exception& e) {
    mark_end(state_, e.what());
    OpRecord r = record();
    throw CollectiveError(describe(r) + " failed: " + e.what(), r);
  }
  // On CPU a returned wait means done. On CUDA it only orders the current stream; the future
  // callback marks the real end.
  if (state_->device == c10::DeviceType::CPU || !state_->has_future) mark_end(state_, "");
  if (state_->finish) state_->finish();
  OpRecord r = record();
  for (CollectiveHook* h : hooks()) h->after_wait(r, state_->outputs);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->waited = true;
}

bool Work::completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->record.state == OpState::Completed || state_->record.state == OpState::Failed;
}

OpRecord Work::record() const {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->record;
}

namespace detail {

Work launch(Group& group, LaunchSpec spec) {
  if (LeaveOutFilter leave_out = g_leave_out.load(); leave_out && leave_out(spec.record)) return Work();
  auto state = std::make_shared<Work::State>();
  OpRecord& r = spec.record;
  r.backend = group.backend_name(spec.device);
  fill_common(group, r);
  count_op(r);
  for (CollectiveHook* h : hooks()) h->before_launch(r, spec.inputs);
  notify_enqueue(r);

  state->record = r;
  state->finish = std::move(spec.finish);
  state->outputs = std::move(spec.outputs);
  state->device = spec.device;
  state->pending = group.pending();
  state->pending->fetch_add(1);
  try {
    state->work = spec.start();
  } catch (const std::exception& e) {
    mark_end(state, e.what());
    throw CollectiveError(describe(r) + " could not start: " + e.what(), r);
  }
  OpRecord started;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->record.t_start_us = steady_now_us();
    state->record.state = OpState::Started;
    started = state->record;
  }
  notify_start(started);
  try {
    auto future = state->work->getFuture();
    if (future) {
      state->has_future = true;
      // The callback keeps the state alive until the op ends, even if the caller drops the
      // Work: the flight recorder must see every op finish.
      future->addCallback([state](c10::ivalue::Future& f) {
        mark_end(state, f.hasError() ? f.tryRetrieveErrorMessage() : std::string());
      });
    }
  } catch (const std::exception&) {
    // Some works (e.g. Gloo send/recv in some versions) have no future: wait() marks the end.
  }
  return Work(state);
}

void run_blocking(Group& group, OpRecord r, const std::function<void()>& body) {
  r.backend = "gloo";
  fill_common(group, r);
  count_op(r);
  notify_enqueue(r);
  auto pending = group.pending();
  pending->fetch_add(1);
  r.t_start_us = steady_now_us();
  r.state = OpState::Started;
  notify_start(r);
  try {
    body();
  } catch (const std::exception& e) {
    r.t_end_us = steady_now_us();
    r.state = OpState::Failed;
    r.error = e.what();
    pending->fetch_sub(1);
    notify_end(r);
    throw CollectiveError(describe(r) + " failed: " + e.what(), r);
  }
  r.t_end_us = steady_now_us();
  r.state = OpState::Completed;
  pending->fetch_sub(1);
  notify_end(r);
}

}  // namespace detail
}  // namespace ddx
