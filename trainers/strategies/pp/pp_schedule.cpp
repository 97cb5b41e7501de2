// The schedules `--pp-schedule` can name (one line each), and the simulation that proves a
// schedule runs to the end on every rank.
#include "strategies/pp/pp_schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ddx/errors/errors.h"

namespace ddx::train {
namespace {

const std::vector<ScheduleKind>& kinds() {
  static const std::vector<ScheduleKind> table = {
      {"gpipe", "all forwards, then all backwards (m micro-batches in flight)", gpipe_schedule, false, flush_bubble},
      {"1f1b", "warm-up forwards, then one forward / one backward (at most p in flight)", one_f_one_b_schedule, false,
       flush_bubble},
      {"interleaved-1f1b", "1F1B over --pp-virtual-stages stages per rank (smaller bubble, more P2P)",
       interleaved_1f1b_schedule, true, interleaved_bubble},
  };
  return table;
}

std::string describe(const PipeAction& a, const PipeShape& s) {
  return std::string(a.kind == PipeAction::Kind::Forward ? "forward" : "backward") + " of micro-batch " +
         std::to_string(a.microbatch) + " at stage " + std::to_string(s.stage_of(a.chunk));
}

}  // namespace

const ScheduleKind& find_schedule(const std::string& name) {
  for (const ScheduleKind& k : kinds()) {
    if (k.name == name) return k;
  }
  throw UsageError("--pp-schedule " + name + " is not one of: " + schedule_names());
}

std::string schedule_names() {
  std::string out;
  for (const ScheduleKind& k : kinds()) out += (out.empty() ? "" : ", ") + k.name;
  return out;
}

ScheduleCheck check_schedules(const ScheduleKind& kind, PipeShape shape) {
  const int p = shape.ranks, S = shape.stages();
  std::vector<PipeSchedule> plans;
  for (int r = 0; r < p; ++r) {
    shape.rank = r;
    plans.push_back(kind.make(shape));
  }
  ScheduleCheck check;
  check.max_in_flight.assign(p, 0);
  // Completed actions by (kind, micro-batch, global stage); a completed action's send is
  // visible to its receiver at once (sends do not block).
  std::set<std::tuple<int, int, int>> done;
  auto key = [](PipeAction::Kind k, int mb, int stage) { return std::make_tuple(static_cast<int>(k), mb, stage); };
  std::vector<size_t> next(p, 0);
  std::vector<int> in_flight(p, 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < p; ++r) {
      shape.rank = r;
      while (next[r] < plans[r].size()) {
        const PipeAction& a = plans[r][next[r]];
        const int s = shape.stage_of(a.chunk);
        if (a.chunk < 0 || a.chunk >= shape.virtual_stages || a.microbatch < 0 || a.microbatch >= shape.microbatches) {
          check.problem = "rank " + std::to_string(r) + " schedules an action outside the pipeline";
          return check;
        }
        const bool forward = a.kind == PipeAction::Kind::Forward;
        const bool ready = forward ? (s == 0 || done.count(key(a.kind, a.microbatch, s - 1)))
                                   : done.count(key(PipeAction::Kind::Forward, a.microbatch, s)) &&
                                         (s == S - 1 || done.count(key(a.kind, a.microbatch, s + 1)));
        if (!ready) break;
        if (!done.insert(key(a.kind, a.microbatch, s)).second) {
          check.problem = "rank " + std::to_string(r) + " runs the " + describe(a, shape) + " twice";
          return check;
        }
        in_flight[r] += forward ? 1 : -1;
        check.max_in_flight[r] = std::max(check.max_in_flight[r], in_flight[r]);
        ++next[r];
        progressed = true;
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < p; ++r) {
    shape.rank = r;
    if (next[r] < plans[r].size()) {
      stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " waits in the " +
               describe(plans[r][next[r]], shape);
    }
  }
  if (!stuck.empty()) {
    check.problem = "deadlock: " + stuck;
    return check;
  }
  if (done.size() != static_cast<size_t>(2 * S * shape.microbatches)) {
    check.problem = "the schedules run " + std::to_string(done.size()) + " actions, not 2 x " + std::to_string(S) +
                    " stages x " + std::to_string(shape.microbatches) + " micro-batches";
    return check;
  }
  check.ok = true;
  return check;
}

}  // namespace ddx::train
