// The flight recorder's ring buffer. Every callback takes one short lock; slots are reused in
// place so recording does not allocate once the ring has wrapped.
#include "ddx/watchdog/flight_recorder.h"

#include <algorithm>

namespace ddx {

FlightRecorder::FlightRecorder(size_t capacity) : slots_(std::max<size_t>(capacity, 1)) {}

GroupProgress& FlightRecorder::progress_locked(const OpRecord& record) {
  for (GroupProgress& g : groups_) {
    if (g.group == record.group) return g;
  }
  GroupProgress g;
  g.group = record.group;
  g.ranks = record.group_ranks;
  groups_.push_back(std::move(g));
  return groups_.back();
}

OpRecord* FlightRecorder::find_locked(uint64_t id) {
  // Newest first: an op usually starts and ends while it is among the last few recorded.
  const uint64_t oldest = next_ > slots_.size() ? next_ - slots_.size() : 0;
  for (uint64_t k = next_; k > oldest; --k) {
    OpRecord& slot = slots_[(k - 1) % slots_.size()];
    if (slot.id == id) return &slot;
  }
  return nullptr;  // overwritten while in flight
}

void FlightRecorder::on_enqueue(const OpRecord& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_[next_ % slots_.size()] = record;
  ++next_;
  GroupProgress& g = progress_locked(record);
  if (record.p2p) {
    g.last_enqueued_p2p = std::max(g.last_enqueued_p2p, record.seq);
  } else {
    g.last_enqueued = std::max(g.last_enqueued, record.seq);
  }
  ++g.in_flight;
  g.last_event_us = last_event_us_ = record.t_enqueue_us;
}

void FlightRecorder::on_start(const OpRecord& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (OpRecord* slot = find_locked(record.id)) {
    slot->state = record.state;
    slot->t_start_us = record.t_start_us;
  }
  GroupProgress& g = progress_locked(record);
  if (!record.p2p) g.last_started = std::max(g.last_started, record.seq);
  g.last_event_us = last_event_us_ = record.t_start_us;
}

void FlightRecorder::on_end(const OpRecord& record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (OpRecord* slot = find_locked(record.id)) {
      slot->state = record.state;
      slot->t_end_us = record.t_end_us;
      if (!record.error.empty()) slot->error = record.error;
    }
    GroupProgress& g = progress_locked(record);
    if (record.state == OpState::Completed) {
      if (record.p2p) {
        g.last_completed_p2p = std::max(g.last_completed_p2p, record.seq);
      } else {
        g.last_completed = std::max(g.last_completed, record.seq);
      }
    }
    if (g.in_flight > 0) --g.in_flight;
    g.last_event_us = last_event_us_ = record.t_end_us;
  }
  if (record.state == OpState::Failed && on_failure_) on_failure_(record);
}

RecorderSnapshot FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RecorderSnapshot s;
  s.capacity = slots_.size();
  s.recorded_total = next_;
  s.groups = groups_;
  s.last_event_us = last_event_us_;
  const uint64_t oldest = next_ > slots_.size() ? next_ - slots_.size() : 0;
  s.entries.reserve(next_ - oldest);
  for (uint64_t k = oldest; k < next_; ++k) s.entries.push_back(slots_[k % slots_.size()]);
  return s;
}

RecorderSnapshot FlightRecorder::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RecorderSnapshot s;
  s.capacity = slots_.size();
  s.recorded_total = next_;
  s.groups = groups_;
  s.last_event_us = last_event_us_;
  return s;
}

std::optional<OpRecord> FlightRecorder::newest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_ == 0) return std::nullopt;
  return slots_[(next_ - 1) % slots_.size()];
}

std::vector<OpRecord> FlightRecorder::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpRecord> out;
  const uint64_t oldest = next_ > slots_.size() ? next_ - slots_.size() : 0;
  for (uint64_t k = oldest; k < next_; ++k) {
    const OpRecord& r = slots_[k % slots_.size()];
    if (r.state == OpState::Scheduled || r.state == OpState::Started) out.push_back(r);
  }
  return out;
}

}  // namespace ddx
