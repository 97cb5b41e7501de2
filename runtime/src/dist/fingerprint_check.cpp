// Store keys: ddx/fp/<group>/<seq>/<group rank> = "<fingerprint>\t<call site>". A rank deletes
// its key of sequence s-1 once it has read everyone's key of s: every member has then written
// s, so every member is done reading s-1.
#include "fingerprint_check.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "ddx/watchdog/job_events.h"
#include "ddx/watchdog/store_lost.h"
#include "ddx/text/text.h"
#include "ddx/watchdog/watchdog.h"
#include "store_host.h"

namespace ddx::detail {
namespace {



class FingerprintCheck : public CollectiveHook {
 public:
  FingerprintCheck(c10::intrusive_ptr<c10d::Store> store, int global_rank, StoreIdentity store_id)
      : store_(std::move(store)), global_rank_(global_rank), store_id_(std::move(store_id)) {}

  void before_launch(OpRecord& r, std::vector<at::Tensor>&) override {
    if (r.p2p || r.group_ranks.size() < 2) return;
    // Every get() below sends too, so the whole check runs with c10's warnings off (it names
    // what fails itself); c10's other warnings wait until the peers' fingerprints are in.
    QuietStoreLogs quiet;
    const int me = group_rank_of(r);
    const std::string prefix = "ddx/fp/" + r.group + "/" + std::to_string(r.seq) + "/";
    const std::string mine = op_fingerprint(r);
    try {
      store_->set(prefix + std::to_string(me), bytes(mine + "\t" + r.call_site));
    } catch (const std::exception&) {
      fail_if_store_lost(r);
      throw;
    }

    // fingerprint -> global ranks, and one call site per fingerprint for the message
    std::map<std::string, std::vector<int>> seen;
    std::map<std::string, std::string> site;
    for (int q = 0; q < static_cast<int>(r.group_ranks.size()); ++q) {
      std::string value;
      if (q == me) {
        value = mine + "\t" + r.call_site;
      } else {
        try {
          auto data = store_->get(prefix + std::to_string(q));
          value.assign(data.begin(), data.end());
        } catch (const std::exception& e) {
          fail_if_store_lost(r);  // the store, not rank q, is what is missing
          fail(r, describe_op(r) + ": rank " + std::to_string(r.group_ranks[q]) +
                      " never reached this collective (--check-collectives waited " +
                      format_duration(store_->getTimeout()) + ")");
        }
      }
      const size_t tab = value.find('\t');
      const std::string fp = value.substr(0, tab);
      seen[fp].push_back(r.group_ranks[q]);
      if (tab != std::string::npos && !site.count(fp)) site[fp] = value.substr(tab + 1);
    }
    if (seen.size() > 1) {
      const Sides sides = sides_of(seen);
      record_mismatch(r, sides);
      fail(r, mismatch_message(r, sides, site));
    }
    if (r.seq > 1) {
      try {
        store_->deleteKey("ddx/fp/" + r.group + "/" + std::to_string(r.seq - 1) + "/" +
                          std::to_string(me));
      } catch (const std::exception&) {
        // only housekeeping
      }
    }
  }

 private:
  static std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

  // Our position in the group: the store knows each member by it.
  int group_rank_of(const OpRecord& r) const {
    for (size_t i = 0; i < r.group_ranks.size(); ++i) {
      if (r.group_ranks[i] == global_rank_) return static_cast<int>(i);
    }
    return 0;
  }

  // The fingerprints the group's members reported, each with its ranks, the most common first.
  // One side is the majority only when it is larger than every other: a tie names no one.
  struct Sides {
    std::vector<std::pair<std::string, std::vector<int>>> largest_first;
    bool has_majority() const { return largest_first[0].second.size() > largest_first[1].second.size(); }
    // The ranks off the majority, sorted (none without a majority).
    std::vector<int> off_majority() const {
      std::vector<int> out;
      if (!has_majority()) return out;
      for (size_t i = 1; i < largest_first.size(); ++i) {
        out.insert(out.end(), largest_first[i].second.begin(), largest_first[i].second.end());
      }
      std::sort(out.begin(), out.end());
      return out;
    }
  };
  static Sides sides_of(const std::map<std::string, std::vector<int>>& seen) {
    Sides sides{{seen.begin(), seen.end()}};
    std::sort(sides.largest_first.begin(), sides.largest_first.end(),
              [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    return sides;
  }

  // For suites: the ranks off the majority.
  void record_mismatch(const OpRecord& r, const Sides& sides) const {
    events::Event("collective_check.mismatch")
        .text("group", r.group)
        .number("seq", static_cast<int64_t>(r.seq))
        .number("rank", global_rank_)
        .number("majority", sides.has_majority() ? 1 : 0)
        .ranks("ranks", sides.off_majority())
        .emit();
  }

  // Majority last ("..., but ranks 0,1,3 called ..."); a tie names every side.
  static std::string mismatch_message(const OpRecord& r, const Sides& sides,
                                      const std::map<std::string, std::string>& site) {
    const auto& by_size = sides.largest_first;
    auto describe = [&](const std::pair<std::string, std::vector<int>>& side) {
      std::string text = ranks_text(side.second) + " called " + side.first;
      auto it = site.find(side.first);
      if (it != site.end() && !it->second.empty()) text += " (at '" + it->second + "')";
      return text;
    };
    std::ostringstream out;
    out << "collective mismatch at " << r.group << " #" << r.seq << ": ";
    if (sides.has_majority()) {
      for (size_t i = 1; i < by_size.size(); ++i) out << (i > 1 ? "; " : "") << describe(by_size[i]);
      out << ", but " << describe(by_size[0]) << " (majority " << by_size[0].second.size() << " of "
          << r.group_ranks.size() << ")";
    } else {
      out << "no majority: ";
      for (size_t i = 0; i < by_size.size(); ++i) out << (i ? "; " : "") << describe(by_size[i]);
    }
    return out.str();
  }

  // Inside a catch block of a store operation: fails the op with the store's one line when its
  // connection broke; returns otherwise.
  void fail_if_store_lost(OpRecord& r) const {
    try {
      rethrow_store_failure(store_id_);
    } catch (const StoreLost& lost) {
      fail(r, lost.what());
    } catch (const std::exception&) {
    }
  }

  // Records the op as failed (the flight recorder and watchdog react as to any failed op) and
  // throws to the caller before anything is launched.
  [[noreturn]] static void fail(OpRecord& r, const std::string& what) {
    notify_enqueue(r);
    r.state = OpState::Failed;
    r.error = what;
    r.t_end_us = steady_now_us();
    notify_end(r);
    throw CollectiveError(what, r);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int global_rank_;
  StoreIdentity store_id_;
};

}  // namespace

std::string op_fingerprint(const OpRecord& r) {
  std::ostringstream out;
  out << to_string(r.op);
  if (!r.reduce_op.empty()) out << "(" << r.reduce_op << ")";
  switch (r.op) {
    case OpType::Barrier:
    case OpType::MonitoredBarrier:
      break;
    case OpType::AllToAll:  // uneven splits legitimately differ per rank
      out << " " << r.dtype;
      break;
    default:
      out << " " << r.dtype << " " << shape_text(r.in_shape);
  }
  if (r.peer >= 0) out << " root " << r.peer;
  return out.str();
}

std::unique_ptr<CollectiveHook> make_fingerprint_check(c10d::Store& store, int global_rank,
                                                       std::chrono::milliseconds timeout,
                                                       const StoreIdentity& store_id) {
  auto clone = store.clone();
  clone->setTimeout(timeout);
  return std::make_unique<FingerprintCheck>(std::move(clone), global_rank, store_id);
}

}  // namespace ddx::detail
