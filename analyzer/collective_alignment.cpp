// Collectives aligned per group by sequence number: mismatches (op, dtype, size) decided by
// majority or, without one, by which rank left the order of calls its own earlier steps repeat,
// else which rank changed its own behaviour at the same call site, else undecided; then which
// ranks are behind the others (never joined, stuck, skipped one, or the majority finished and a
// minority issued an extra collective).
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "analyzer/analysis_util.h"
#include "analyzer/diagnosis.h"
#include "ddx/text/text.h"

namespace ddx::analyze::detail {
namespace {

struct GroupView {
  std::string name;
  std::vector<int> members;
  std::map<int, std::map<uint64_t, const Entry*>> entries;  // rank -> seq -> entry (collectives)
  std::map<int, uint64_t> last_enqueued;                    // ranks with a dump
};

std::map<std::string, GroupView> group_views(const TraceSet& traces) {
  std::map<std::string, GroupView> views;
  for (const auto& [rank, d] : traces.dumps) {
    // A dump's entries take turns among its few groups: those are looked for first, not in
    // the map of every group (at a thousand ranks, millions of name comparisons saved).
    std::vector<GroupView*> own;
    for (const auto& [name, pos] : d.groups) {
      GroupView& v = views[name];
      v.name = name;
      if (v.members.empty()) v.members = pos.ranks;
      v.last_enqueued[rank] = pos.last_enqueued;
      own.push_back(&v);
    }
    for (const Entry& e : d.entries) {
      if (e.p2p) continue;
      auto known = std::find_if(own.begin(), own.end(), [&](const GroupView* v) { return v->name == e.group; });
      GroupView& v = known != own.end() ? **known : views[e.group];
      v.name = e.group;
      if (v.members.empty()) v.members = e.group_ranks;
      v.entries[rank][e.seq] = &e;
      v.last_enqueued[rank] = std::max(v.last_enqueued[rank], e.seq);
    }
  }
  return views;
}

using Attribute = std::function<std::string(const Entry&)>;

struct Check {
  FindingKind kind;
  const char* what;
  Attribute value;
};

std::string size_value(const Entry& e) {
  if (e.op == "all_to_all" || e.op == "barrier" || e.op == "monitored_barrier") return "";
  return shape_text(e.in_shape);
}

const std::vector<Check>& checks() {
  static const std::vector<Check> all = {
      {FindingKind::OpMismatch, "op", [](const Entry& e) { return op_name(e); }},
      {FindingKind::DtypeMismatch, "dtype", [](const Entry& e) { return e.dtype; }},
      {FindingKind::SizeMismatch, "size", size_value},
  };
  return all;
}

// The user's frames of a recorded stack (PyTorch's own frames left out), innermost first.
std::vector<std::string> user_frames(const Entry& e) {
  std::vector<std::string> out;
  for (const std::string& frame : e.stack) {
    if (!inside_torch(frame)) out.push_back(frame);
  }
  return out;
}

// Where in the program a call was made, alike for the same call on every step: the user's frames
// of PyTorch's recorded stack (its call site alone is often one helper that every collective
// goes through), else ddx's call-site label with its step numbers left out.
std::string program_point(const Entry& e) {
  std::string point;
  for (const std::string& frame : user_frames(e)) point += frame + "|";
  return point.empty() ? normalize_call_site(e.call_site) : point;
}

// "fr_job.py:84 train_step" from "/job/fr_job.py:84 in train_step".
std::string short_frame(const std::string& frame) {
  std::string out = frame.substr(frame.find_last_of('/') + 1);
  const size_t in = out.find(" in ");
  return in == std::string::npos ? out : out.substr(0, in) + " " + out.substr(in + 4);
}

// A call's place as a reader finds it: its call site, and for a recorded stack the caller too
// (a helper's one line serves many calls).
std::string place_text(const Entry& e) {
  const std::vector<std::string> frames = user_frames(e);
  std::string text = "'" + e.call_site + "'";
  if (frames.size() > 1) text += " from '" + short_frame(frames[1]) + "'";
  return text;
}

// Whether `earlier` was made at the place in the program `now` was, on an earlier step: the same
// user frames of PyTorch's stack, or ddx's label with another step number.
bool same_place_earlier_step(const Entry& earlier, const Entry& now) {
  if (!now.stack.empty()) return program_point(earlier) == program_point(now);
  return earlier.call_site != now.call_site && normalize_call_site(earlier.call_site) == normalize_call_site(now.call_site);
}

// The most recent earlier entry of `rank` in the group at the same call site (steps differ).
const Entry* previous_at_same_site(const GroupView& g, int rank, const Entry& now) {
  if (now.call_site.empty()) return nullptr;
  auto it = g.entries.find(rank);
  if (it == g.entries.end()) return nullptr;
  const Entry* found = nullptr;
  for (const auto& [seq, e] : it->second) {
    if (seq >= now.seq) break;
    if (same_place_earlier_step(*e, now)) found = e;
  }
  return found;
}

struct Decision {
  std::vector<int> culprits;  // empty: undecided
  std::vector<int> affected;
  std::string culprit_value, expected_value, decided_by;
};

using Sides = std::vector<std::pair<std::string, std::vector<int>>>;  // value -> ranks, largest first

std::string tally(const Sides& order) {
  std::string out;
  for (const auto& side : order) out += (out.empty() ? "" : " vs ") + std::to_string(side.second.size());
  return out;
}

// The first number, up to `seq`, at which the ranks of `order` called from different places in
// the program: where their paths parted.
std::optional<uint64_t> parting(const GroupView& g, const Sides& order, uint64_t seq) {
  const int first_rank = order[0].second.front();
  for (const auto& [s, e] : g.entries.at(first_rank)) {
    if (s > seq) break;
    const std::string point = program_point(*e);
    for (const auto& side : order) {
      for (int r : side.second) {
        const auto& mine = g.entries.at(r);
        auto it = mine.find(s);
        if (it != mine.end() && program_point(*it->second) != point) return s;
      }
    }
  }
  return std::nullopt;
}

// How a rank's calls from #from to #to follow the order its own calls before #from repeat (a
// training loop's collectives come in the same order every step).
struct OrderCheck {
  bool has_history = false;                            // two consecutive calls before #from
  const Entry* before = nullptr, *after = nullptr;     // the first pair in an order never seen
};

OrderCheck check_order(const std::map<uint64_t, const Entry*>& mine, uint64_t from, uint64_t to) {
  OrderCheck out;
  std::set<std::pair<std::string, std::string>> known;
  const Entry* prev = nullptr;
  for (const auto& [s, e] : mine) {
    if (s > to) break;
    if (prev && prev->seq + 1 == s) {
      std::pair<std::string, std::string> step{program_point(*prev), program_point(*e)};
      if (s < from) {
        known.insert(std::move(step));
      } else if (!known.count(step)) {
        out.before = prev;
        out.after = e;
        break;
      }
    }
    prev = e;
  }
  out.has_history = !known.empty();
  return out;
}

// Whether `culprits` and `others` are the two sides of the mismatch at `seq`: the others all
// called one thing and no culprit called it (else "rank 1 called X where the others called X").
bool splits_the_sides(const GroupView& g, uint64_t seq, const std::vector<int>& culprits,
                      const std::vector<int>& others, const Attribute& value) {
  const std::string expected = value(*g.entries.at(others.front()).at(seq));
  for (int r : others) {
    if (value(*g.entries.at(r).at(seq)) != expected) return false;
  }
  for (int r : culprits) {
    if (value(*g.entries.at(r).at(seq)) == expected) return false;
  }
  return true;
}

// No majority: the ranks whose calls left the order their own earlier steps repeat, while the
// others kept to it, are the culprits (rank 1 skipped the rest of a step and is back at its
// first all_reduce while rank 0 goes on to the step's barrier).
std::optional<Decision> decide_by_program_order(const GroupView& g, uint64_t seq, const Sides& order,
                                                const Attribute& value) {
  const std::optional<uint64_t> from = parting(g, order, seq);
  if (!from) return std::nullopt;
  std::vector<int> left, kept;
  OrderCheck first_left;
  for (const auto& side : order) {
    for (int r : side.second) {
      const OrderCheck c = check_order(g.entries.at(r), *from, seq);
      if (!c.has_history) return std::nullopt;
      if (c.after) {
        if (left.empty()) first_left = c;
        left.push_back(r);
      } else {
        kept.push_back(r);
      }
    }
  }
  if (left.empty() || kept.empty() || !splits_the_sides(g, seq, left, kept, value)) return std::nullopt;
  std::sort(left.begin(), left.end());
  std::sort(kept.begin(), kept.end());
  Decision d;
  d.culprits = left;
  d.affected = kept;
  d.culprit_value = value(*g.entries.at(left.front()).at(seq));
  d.expected_value = value(*g.entries.at(kept.front()).at(seq));
  const Entry& b = *first_left.before;
  const Entry& a = *first_left.after;
  d.decided_by = "no majority (" + tally(order) + "); " + rank_list(left) + " left the order of calls " +
                 (left.size() == 1 ? "its" : "their") + " earlier steps repeat: " + op_name(b) + " #" +
                 std::to_string(b.seq) + " at " + place_text(b) + " was followed by " + op_name(a) + " #" +
                 std::to_string(a.seq) + " at " + place_text(a) + ", as never before; " + rank_list(kept) +
                 " kept to it";
  return d;
}

// No majority, and every rank kept its order: the ranks that changed what they call at this
// place in the program since an earlier step are the culprits (all_gather where the step
// before had all_reduce).
std::optional<Decision> decide_by_call_site_history(const GroupView& g, uint64_t seq, const Sides& order,
                                                    const Attribute& value) {
  std::vector<int> changed, steady;
  std::string history;
  for (const auto& [val, ranks] : order) {
    for (int r : ranks) {
      const Entry* now = g.entries.at(r).at(seq);
      const Entry* before = previous_at_same_site(g, r, *now);
      if (!before) return std::nullopt;
      if (value(*before) != val) {
        changed.push_back(r);
        history = "rank " + std::to_string(r) + " called " + value(*before) + " at " + place_text(*before) +
                  " (#" + std::to_string(before->seq) + ") and " + val + " at " + place_text(*now);
      } else {
        steady.push_back(r);
      }
    }
  }
  if (changed.empty() || steady.empty() || !splits_the_sides(g, seq, changed, steady, value)) return std::nullopt;
  std::sort(changed.begin(), changed.end());
  std::sort(steady.begin(), steady.end());
  Decision d;
  d.culprits = changed;
  d.affected = steady;
  d.culprit_value = value(*g.entries.at(changed[0]).at(seq));
  d.expected_value = value(*g.entries.at(steady[0]).at(seq));
  d.decided_by = "no majority (" + tally(order) + "); " + history +
                 ", while the others did the same as at that call site before";
  return d;
}

// sides: value -> ranks holding it.
Decision decide(const GroupView& g, uint64_t seq, const std::map<std::string, std::vector<int>>& sides,
                const Attribute& value) {
  Sides order(sides.begin(), sides.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  size_t total = 0;
  for (const auto& side : order) total += side.second.size();
  Decision d;
  if (order[0].second.size() > order[1].second.size()) {
    d.expected_value = order[0].first;
    d.affected = order[0].second;
    for (size_t i = 1; i < order.size(); ++i) {
      d.culprits.insert(d.culprits.end(), order[i].second.begin(), order[i].second.end());
      if (d.culprit_value.empty()) d.culprit_value = order[i].first;
    }
    d.decided_by = "majority: " + rank_list(order[0].second) + " called " + order[0].first + " (" +
                   std::to_string(order[0].second.size()) + " of " + std::to_string(total) + ")";
    return d;
  }
  if (auto by_order = decide_by_program_order(g, seq, order, value)) return *by_order;
  if (auto by_history = decide_by_call_site_history(g, seq, order, value)) return *by_history;
  // Nothing tells the sides apart: naming one would be a guess.
  for (const auto& side : order) d.affected.insert(d.affected.end(), side.second.begin(), side.second.end());
  std::sort(d.affected.begin(), d.affected.end());
  d.decided_by = "undecided: no majority (" + tally(order) +
                 "), and neither the order of each rank's calls nor what it called at this call site on earlier "
                 "steps shows which side changed";
  return d;
}

// Collectives issued at `site` by `rank` from `first` to `last`.
int calls_at_site(const GroupView& g, int rank, const std::string& site, uint64_t first, uint64_t last) {
  int n = 0;
  for (const auto& [seq, e] : g.entries.at(rank)) {
    if (seq >= first && seq <= last && e->call_site == site) ++n;
  }
  return n;
}

// Whether the culprit's call came from the same place in the user's code as the others' (a frame
// they share below the outermost one): it then called another op in place of theirs, rather
// than leaving theirs out and going on to the next.
bool same_caller(const Entry& mine, const Entry& theirs) {
  const std::vector<std::string> t = user_frames(theirs), m = user_frames(mine);
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (std::find(m.begin(), m.end(), t[i]) != m.end()) return true;
  }
  return false;
}

// An op mismatch whose culprit made fewer calls at the others' call site than they did is a
// skipped collective: a loop that calls the same all_reduce every step has one call site for
// all of them, so only the count shows that the culprit left one out and moved on to its next
// collective (PyTorch's recorder gives the call site from its stack).
void skipped_instead_of_mismatched(const GroupView& g, Finding& f) {
  if (f.culprits.size() != 1 || f.affected.empty()) return;
  const int culprit = f.culprits.front();
  const Entry& mine = *g.entries.at(culprit).at(f.seq);
  const Entry& theirs = *g.entries.at(f.affected.front()).at(f.seq);
  if (theirs.call_site.empty() || mine.call_site == theirs.call_site || same_caller(mine, theirs)) return;
  // Counted from the first number every rank still has (a wrapped ring buffer lost the rest).
  uint64_t first = 0;
  for (const auto& [rank, by_seq] : g.entries) first = std::max(first, by_seq.begin()->first);
  const int own = calls_at_site(g, culprit, theirs.call_site, first, f.seq);
  for (int r : f.affected) {
    if (calls_at_site(g, r, theirs.call_site, first, f.seq) <= own) return;
  }
  const int others = calls_at_site(g, f.affected.front(), theirs.call_site, first, f.seq);
  f.kind = FindingKind::SkippedCollective;
  f.op = theirs.op;
  f.expected_op = theirs.op;
  f.call_site = theirs.call_site;
  f.decided_by = "from #" + std::to_string(first) + " to #" + std::to_string(f.seq) + " it called " +
                 op_name(theirs) + " at '" + theirs.call_site + "' " + std::to_string(own) + " time(s), " +
                 rank_list(f.affected) + " " + std::to_string(others) + "; " + f.decided_by;
  f.summary = "rank " + std::to_string(culprit) + " skipped " + op_name(theirs) + " at '" + theirs.call_site +
              "' and went on to " + op_name(mine) + (mine.call_site.empty() ? "" : " at '" + mine.call_site + "'") +
              ", so it never joined " + describe(theirs) + " that " + rank_list(f.affected) + " " + verb_for(f.affected, "wait") + " in";
}

// Whether two entries are the same call as every check reads it (op, dtype, size).
bool same_call(const Entry& a, const Entry& b) {
  return a.op == b.op && a.reduce_op == b.reduce_op && a.dtype == b.dtype && a.in_shape == b.in_shape;
}

// The finding for a mismatch at `seq` as `d` decided it. Undecided, it names no rank and no op
// as the culprit's: each side's call is in the summary, alike in the text and the JSON.
Finding mismatch_finding(const GroupView& g, uint64_t seq, const Check& check,
                         const std::map<std::string, std::vector<int>>& sides, const Decision& d) {
  Finding f;
  f.kind = check.kind;
  f.culprits = d.culprits;
  f.affected = d.affected;
  f.group = g.name;
  f.seq = seq;
  f.decided_by = d.decided_by;
  for (const auto& [val, ranks] : sides) {
    const Entry& e = *g.entries.at(ranks[0]).at(seq);
    f.evidence.push_back(rank_list(ranks) + ": " + op_name(e) + " " + tensor_text(e) +
                         (e.call_site.empty() ? "" : " at '" + e.call_site + "'") + ", " + e.state);
    if (!d.culprits.empty() && val == d.expected_value) f.expected_op = e.op;
  }
  // The whole call for dtype and size mismatches: "all_reduce(sum) float32 [1000]".
  auto call = [&](const std::string& value, const Entry& e) {
    return check.kind == FindingKind::OpMismatch ? value : op_name(e) + " " + tensor_text(e);
  };
  std::ostringstream s;
  if (d.culprits.empty()) {
    s << "ranks disagree on #" << seq << " on group " << g.name << ": ";
    std::vector<std::pair<std::string, std::vector<int>>> by_rank(sides.begin(), sides.end());
    std::sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (size_t i = 0; i < by_rank.size(); ++i) {
      const Entry& e = *g.entries.at(by_rank[i].second[0]).at(seq);
      s << (i ? ", " : "") << rank_list(by_rank[i].second) << " called " << call(by_rank[i].first, e);
      if (!e.call_site.empty()) s << " (at '" << e.call_site << "')";
    }
    s << "; nothing shows which side changed";
    f.summary = s.str();
    return f;
  }
  const Entry& mine = *g.entries.at(d.culprits[0]).at(seq);
  f.op = mine.op;
  f.call_site = mine.call_site;
  s << rank_list(f.culprits) << " called " << call(d.culprit_value, mine) << " as #" << seq << " on group " << g.name;
  if (!f.call_site.empty()) s << " (at '" << f.call_site << "')";
  if (!d.expected_value.empty()) {
    s << " where the others called " << call(d.expected_value, *g.entries.at(d.affected.front()).at(seq));
  }
  f.summary = s.str();
  return f;
}

// The first sequence number at which the members disagree, per group.
std::vector<Finding> mismatches(const GroupView& g) {
  std::vector<uint64_t> seqs;
  for (const auto& [rank, by_seq] : g.entries) {
    for (const auto& [seq, e] : by_seq) seqs.push_back(seq);
  }
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  // Each rank's entries walked once alongside the numbers, not looked up per number.
  std::vector<std::pair<std::map<uint64_t, const Entry*>::const_iterator, std::map<uint64_t, const Entry*>::const_iterator>>
      cursors;
  for (const auto& [rank, by_seq] : g.entries) cursors.emplace_back(by_seq.begin(), by_seq.end());
  for (uint64_t seq : seqs) {
    // Most numbers hold the same call on every rank: compared field by field first, so the
    // checks' texts are built only where something differs (at 1,024 ranks, the difference
    // between seconds and a blink).
    const Entry* first = nullptr;
    bool differ = false;
    for (auto& [at, end] : cursors) {
      while (at != end && at->first < seq) ++at;
      if (at == end || at->first != seq) continue;
      if (!first) first = at->second;
      differ = differ || !same_call(*first, *at->second);
    }
    if (!differ) continue;
    for (const Check& check : checks()) {
      std::map<std::string, std::vector<int>> sides;
      for (const auto& [rank, by_seq] : g.entries) {
        auto it = by_seq.find(seq);
        if (it != by_seq.end()) sides[check.value(*it->second)].push_back(rank);
      }
      if (sides.size() < 2) continue;
      Finding f = mismatch_finding(g, seq, check, sides, decide(g, seq, sides, check.value));
      if (check.kind == FindingKind::OpMismatch && !f.culprits.empty()) skipped_instead_of_mismatched(g, f);
      return {f};  // later sequence numbers only show the consequences
    }
  }
  return {};
}

// The call site the majority of `others` used at `seq`, "" when unknown.
std::string majority_site(const GroupView& g, const std::vector<int>& others, uint64_t seq) {
  std::map<std::string, int> votes;
  for (int r : others) {
    auto it = g.entries.find(r);
    if (it == g.entries.end()) continue;
    auto e = it->second.find(seq);
    if (e != it->second.end()) ++votes[e->second->call_site];
  }
  if (votes.empty()) return "";
  return std::max_element(votes.begin(), votes.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

// Whether more than half of `others` called #seq at `site`, which makes it their majority site
// (asked before counting every vote: at a thousand ranks that is most of the time saved).
bool most_used(const GroupView& g, const std::vector<int>& others, uint64_t seq, const std::string& site) {
  size_t used = 0;
  for (int r : others) {
    auto it = g.entries.find(r);
    if (it == g.entries.end()) continue;
    auto e = it->second.find(seq);
    if (e != it->second.end() && e->second->call_site == site && 2 * ++used > others.size()) return true;
  }
  return false;
}

// A behind rank whose call sites run one ahead of everyone else's from some #s on skipped #s.
std::optional<uint64_t> skipped_seq(const GroupView& g, int rank, const std::vector<int>& others) {
  auto it = g.entries.find(rank);
  if (it == g.entries.end()) return std::nullopt;
  for (const auto& [seq, e] : it->second) {
    if (e->call_site.empty() || most_used(g, others, seq, e->call_site)) continue;
    const std::string theirs = majority_site(g, others, seq);
    if (theirs.empty() || e->call_site.empty() || theirs == e->call_site) continue;
    if (majority_site(g, others, seq + 1) == e->call_site) return seq;
    return std::nullopt;
  }
  return std::nullopt;
}

// Other ops this rank is blocked in (other groups, point-to-point): where it is instead.
std::string elsewhere(const RankDump& d, const std::string& group) {
  for (const Entry* e : blocked_ops(d)) {
    if (e->group != group || e->p2p) {
      return "; it is blocked in " + describe(*e) + " for " + seconds(d.seconds_before_dump(e->enqueue_us));
    }
  }
  return "";
}

// PyTorch's Gloo process group records collectives only: a send or recv leaves no entry. A
// rank that "never joined" may then be blocked in one, the fault being its peer's; the dumps
// cannot tell, so the verdict says so rather than blame the waiting rank without a doubt.
std::string unrecorded_p2p_hedge(const RankDump& d, int rank) {
  const bool pytorch_gloo = !d.written_by_ddx && d.format.rfind("pytorch", 0) == 0 && !d.entries.empty() &&
                            d.entries.back().backend == "gloo";
  if (!pytorch_gloo) return "";
  const std::string r = "rank " + std::to_string(rank);
  return "; PyTorch's Gloo recorder leaves out send/recv, so if the job uses them " + r +
         " may be waiting in a recv whose sender never sent";
}

std::vector<Finding> behind(const GroupView& g, const TraceSet& traces) {
  std::vector<Finding> out;
  if (g.last_enqueued.size() < 2) return out;
  uint64_t front = 0;
  for (const auto& [rank, seq] : g.last_enqueued) front = std::max(front, seq);
  std::vector<int> ahead, back;
  for (const auto& [rank, seq] : g.last_enqueued) (seq == front ? ahead : back).push_back(rank);
  if (back.empty()) return out;
  auto entry_at = [&](int rank, uint64_t seq) -> const Entry* {
    auto r = g.entries.find(rank);
    if (r == g.entries.end()) return nullptr;
    auto e = r->second.find(seq);
    return e == r->second.end() ? nullptr : e->second;
  };
  if (back.size() > ahead.size()) {
    // The majority stopped at the same place: the few ranks ahead issued a collective nobody
    // else did (PyTorch's FR tutorial: rank 0 runs one all_reduce more).
    Finding f;
    f.kind = FindingKind::ExtraCollective;
    f.culprits = ahead;
    f.affected = back;
    f.group = g.name;
    f.seq = front;
    const Entry* e = entry_at(ahead[0], front);
    f.op = e ? e->op : "";
    f.call_site = e ? e->call_site : "";
    f.summary = rank_list(ahead) + " issued " + (e ? describe(*e) : "#" + std::to_string(front)) +
                " that " + rank_list(back) + " never joined";
    f.decided_by = "majority: " + rank_list(back) + " stopped before #" + std::to_string(front) + " (" +
                   std::to_string(back.size()) + " of " + std::to_string(back.size() + ahead.size()) + ")";
    out.push_back(f);
    return out;
  }
  for (int r : back) {
    const RankDump& d = traces.dumps.at(r);
    const uint64_t mine = g.last_enqueued.at(r);
    const uint64_t next = mine + 1;
    const Entry* waiting = nullptr;  // what the others are in
    for (int a : ahead) {
      if (const Entry* e = entry_at(a, next)) {
        waiting = e;
        break;
      }
    }
    const Entry* last = entry_at(r, mine);
    Finding f;
    f.culprits = {r};
    f.affected = ahead;
    f.group = g.name;
    f.seq = next;
    f.op = waiting ? waiting->op : "";
    f.call_site = waiting ? waiting->call_site : "";
    const std::string their_op = waiting ? describe(*waiting) : "#" + std::to_string(next) + " on group " + g.name;
    f.decided_by = (ahead.size() > back.size() ? "majority: " : "") + rank_list(ahead) + " reached #" +
                   std::to_string(front) + (ahead.size() > back.size() ? " (" + std::to_string(ahead.size()) +
                   " of " + std::to_string(ahead.size() + back.size()) + ")" : "; the rank behind holds them up");
    if (auto skipped = skipped_seq(g, r, ahead)) {
      const std::string site = majority_site(g, ahead, *skipped);
      const Entry* theirs = nullptr;
      for (int a : ahead) {
        if ((theirs = entry_at(a, *skipped))) break;
      }
      const Entry* own = entry_at(r, *skipped);
      f.kind = FindingKind::SkippedCollective;
      f.decided_by = "from #" + std::to_string(*skipped) + " on, its call sites run one collective ahead of " +
                     rank_list(ahead) + "'s; " + f.decided_by;
      f.seq = *skipped;
      f.op = theirs ? theirs->op : f.op;
      f.call_site = site;
      f.summary = "rank " + std::to_string(r) + " skipped " +
                  (theirs ? op_name(*theirs) : std::string("a collective")) + " #" +
                  std::to_string(*skipped) + " on group " + g.name + " at '" + site + "' (its #" +
                  std::to_string(*skipped) + " was '" + (own ? own->call_site : "?") +
                  "'), so it never joined " + their_op;
    } else if (last && blocked(d, *last)) {
      f.kind = FindingKind::Stuck;
      f.summary = "rank " + std::to_string(r) + " is stuck in " + describe(*last) + " (in flight " +
                  seconds(d.seconds_before_dump(last->enqueue_us)) + ") while " + rank_list(ahead) +
                  " " + verb_for(ahead, "wait") + " in " + their_op;
    } else {
      f.kind = FindingKind::NeverJoined;
      std::string idle = last && last->end_us > 0 ? ", idle " + seconds(d.seconds_before_dump(last->end_us)) +
                                                        " since #" + std::to_string(mine) + " ended"
                                                  : "";
      const std::string where = elsewhere(d, g.name);
      f.summary = "rank " + std::to_string(r) + " never joined " + their_op + idle + where +
                  (where.empty() ? unrecorded_p2p_hedge(d, r) : "");
    }
    for (int a : ahead) {
      f.evidence.push_back("rank " + std::to_string(a) + ": " + position_text(traces.dumps.at(a), g.name));
    }
    f.evidence.push_back("rank " + std::to_string(r) + ": " + position_text(d, g.name));
    out.push_back(f);
  }
  return out;
}

}  // namespace

std::vector<Finding> find_collective_problems(const TraceSet& traces) {
  // Groups are judged independently, on every core (a thousand ranks' world group is one job,
  // their hundred node groups the others); the findings come out in the groups' order.
  const std::map<std::string, GroupView> views = group_views(traces);
  std::vector<const GroupView*> groups;
  for (const auto& [name, g] : views) groups.push_back(&g);
  std::vector<std::vector<Finding>> found(groups.size());
  for_each_index_in_parallel(groups.size(), [&](size_t i) {
    found[i] = mismatches(*groups[i]);
    auto b = behind(*groups[i], traces);
    found[i].insert(found[i].end(), b.begin(), b.end());
  });
  std::vector<Finding> out;
  for (auto& f : found) out.insert(out.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
  return out;
}

}  // namespace ddx::analyze::detail
