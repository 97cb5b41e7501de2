#include "analyzer/analysis_util.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <thread>

#include "ddx/text/text.h"

namespace ddx::analyze {

const char* to_string(FindingKind kind) {
  switch (kind) {
    case FindingKind::OpMismatch: return "op-mismatch";
    case FindingKind::DtypeMismatch: return "dtype-mismatch";
    case FindingKind::SizeMismatch: return "size-mismatch";
    case FindingKind::MembershipMismatch: return "membership-mismatch";
    case FindingKind::P2PDeadlock: return "p2p-deadlock";
    case FindingKind::DeadRank: return "dead-rank";
    case FindingKind::StoppedPeer: return "stopped-peer";
    case FindingKind::SkippedCollective: return "skipped-collective";
    case FindingKind::NeverJoined: return "never-joined";
    case FindingKind::Stuck: return "stuck";
    case FindingKind::ExtraCollective: return "extra-collective";
    case FindingKind::Failed: return "failed";
    case FindingKind::NoDump: return "no-dump";
  }
  return "unknown";
}

namespace detail {

std::string normalize_call_site(const std::string& site) {
  std::string out;
  for (size_t i = 0; i < site.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(site[i]))) {
      out += '#';
      while (i + 1 < site.size() && std::isdigit(static_cast<unsigned char>(site[i + 1]))) ++i;
    } else {
      out += site[i];
    }
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  return out.str();
}

std::string verb_for(const std::vector<int>& ranks, const std::string& verb) {
  return ranks.size() == 1 ? verb + "s" : verb;
}

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, s < 10 ? "%.2f s" : "%.1f s", s);
  return buffer;
}

std::string op_name(const Entry& e) {
  return e.reduce_op.empty() ? e.op : e.op + "(" + e.reduce_op + ")";
}

std::string tensor_text(const Entry& e) {
  if (e.dtype.empty()) return "";
  return e.dtype + " " + shape_text(e.in_shape);
}

std::string describe(const Entry& e) {
  std::ostringstream out;
  out << op_name(e) << (e.p2p ? " p2p#" : " #") << e.seq << " on group " << e.group;
  if (e.p2p && e.peer_global() >= 0) {
    out << (e.op == "send" ? " to rank " : " from rank ") << e.peer_global();
  }
  if (!e.call_site.empty()) out << " ('" << e.call_site << "')";
  return out.str();
}

const Entry* last_collective(const RankDump& d, const std::string& group) {
  // A group's numbers grow in recording order, so the last one is among the newest entries: the
  // scan starts from the end and stops below it (asked of every rank for every group, which
  // at a thousand ranks was millions of entries). Of entries sharing the number (a coalesced
  // op and its batch entry) the first recorded is the one.
  const Entry* last = nullptr;
  for (auto it = d.entries.rbegin(); it != d.entries.rend(); ++it) {
    if (it->group != group || it->p2p) continue;
    if (last && it->seq < last->seq) break;
    last = &*it;
  }
  return last;
}

bool blocked(const RankDump& d, const Entry& e) {
  if (e.in_flight()) return true;
  return e.failed() && d.collective_timeout_ms > 0 && e.end_us > e.enqueue_us &&
         e.end_us - e.enqueue_us >= d.collective_timeout_ms * 1000 * 9 / 10;
}

std::vector<const Entry*> blocked_ops(const RankDump& d) {
  std::vector<const Entry*> out;
  for (const Entry& e : d.entries) {
    if (blocked(d, e)) out.push_back(&e);
  }
  return out;
}

std::string position_text(const RankDump& d, const std::string& group) {
  const Entry* last = last_collective(d, group);
  auto g = d.groups.find(group);
  if (!last) {
    if (g == d.groups.end()) return "-";
    return "#" + std::to_string(g->second.last_enqueued) + " (not in its recorder)";
  }
  std::ostringstream out;
  out << "#" << last->seq << " ";
  if (last->in_flight()) {
    out << "in flight " << seconds(d.seconds_before_dump(last->enqueue_us));
  } else if (last->failed()) {
    out << "failed after " << seconds((last->end_us - last->enqueue_us) / 1e6);
  } else if (last->end_us > 0) {
    out << "done, idle " << seconds(d.seconds_before_dump(last->end_us));
  } else {
    out << "done";  // PyTorch's Gloo recorder keeps no end times
  }
  out << ": " << op_name(*last);
  if (!last->call_site.empty()) out << " '" << last->call_site << "'";
  return out.str();
}

bool inside_torch(const std::string& file) {
  return file.find("/torch/") != std::string::npos || file.rfind("torch/", 0) == 0 || file.rfind("<frozen", 0) == 0;
}

void place_at(Finding& f, const Entry& e) {
  f.group = e.group;
  f.seq = e.seq;
  f.p2p = e.p2p;
  f.op = e.op;
  f.call_site = e.call_site;
}

void for_each_index_in_parallel(size_t n, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < n; i = next++) work(i);
  };
  const size_t threads = std::min<size_t>({n, std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(drain);
  drain();
  for (std::thread& t : pool) t.join();
}

}  // namespace detail
}  // namespace ddx::analyze
