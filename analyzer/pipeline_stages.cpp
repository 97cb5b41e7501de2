// Pipeline stages as the dumps show them (`ddx train --strategy pp`). A pipeline group is a
// DeviceMesh dimension named "pp" (groups "<mesh>.pp.<i>"); the executor labels every hop
// "step S micro M forward|backward stage N", N being the stage of the rank that runs it. So a
// rank's stages come from its own labels, and from its peers' (a receive of stage N's forward
// comes from stage N - 1): a rank that stopped before its first hop of a step is still placed
// by what the others sent it on earlier steps or wait to receive from it now.
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "analyzer/analysis_util.h"

namespace ddx::analyze::detail {
namespace {

bool pipeline_group(const std::string& name) { return name.find(".pp.") != std::string::npos; }

struct Hop {
  int microbatch = 0;
  bool forward = true;
  int stage = 0;  // of the rank that recorded it
};

std::optional<int> number_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + key.size(), end = i;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == i) return std::nullopt;
  return std::stoi(text.substr(i, end - i));
}

std::optional<Hop> hop_of(const Entry& e) {
  if (!e.p2p || !pipeline_group(e.group)) return std::nullopt;
  const auto micro = number_after(e.call_site, " micro ");
  const bool forward = e.call_site.find(" forward stage ") != std::string::npos;
  const auto stage = number_after(e.call_site, forward ? " forward stage " : " backward stage ");
  if (!micro || !stage) return std::nullopt;
  return Hop{*micro, forward, *stage};
}

// The stage of the peer of a hop: forwards flow to higher stages, gradients to lower ones.
int peer_stage(const Hop& h, bool send) { return h.stage + ((h.forward == send) ? 1 : -1); }

}  // namespace

std::map<int, PipelinePlace> pipeline_places(const TraceSet& traces) {
  std::map<int, PipelinePlace> places;
  for (const auto& [rank, d] : traces.dumps) {
    for (const auto& [name, pos] : d.groups) {
      if (!pipeline_group(name)) continue;
      for (size_t i = 0; i < pos.ranks.size(); ++i) places[pos.ranks[i]] = {name, static_cast<int>(i), {}};
    }
  }
  for (const auto& [rank, d] : traces.dumps) {
    for (const Entry& e : d.entries) {
      const auto h = hop_of(e);
      if (!h) continue;
      if (places.count(rank)) places[rank].stages.insert(h->stage);
      const int peer = e.peer_global();
      if (peer >= 0 && places.count(peer)) places[peer].stages.insert(peer_stage(*h, e.op == "send"));
    }
  }
  return places;
}

std::string stage_text(const PipelinePlace& place) {
  if (place.stages.empty()) return "pipeline rank " + std::to_string(place.position) + " of group " + place.group;
  std::string out = place.stages.size() == 1 ? "pipeline stage " : "pipeline stages ";
  size_t i = 0;
  for (int s : place.stages) out += (i++ ? (i == place.stages.size() ? " and " : ", ") : "") + std::to_string(s);
  return out;
}

std::string pipeline_wait(const Entry& e) {
  const auto h = hop_of(e);
  if (!h) return "";
  const std::string mb = "micro-batch " + std::to_string(h->microbatch);
  const std::string peer = "stage " + std::to_string(peer_stage(*h, e.op == "send"));
  const std::string what = h->forward ? "activation" : "gradient";
  if (e.op == "recv") return mb + "'s " + what + " from " + peer;
  return peer + " to take " + mb + "'s " + what;
}

void add_pipeline_stages(const TraceSet& traces, std::vector<Finding>& findings) {
  const auto places = pipeline_places(traces);
  if (places.empty()) return;
  for (Finding& f : findings) {
    if (f.kind == FindingKind::StoppedPeer) continue;  // names the stages itself
    for (int r : f.culprits) {
      auto it = places.find(r);
      if (it != places.end()) f.summary += "; rank " + std::to_string(r) + " is " + stage_text(it->second);
    }
  }
}

}  // namespace ddx::analyze::detail
