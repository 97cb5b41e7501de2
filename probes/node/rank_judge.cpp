#include "node/rank_judge.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ddx/text/text.h"

namespace ddx::node {
namespace {

std::vector<std::string> hosts_in_order(const std::vector<RankSamples>& ranks) {
  std::vector<std::string> hosts;
  for (const auto& r : ranks) {
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  return hosts;
}

// A host's figure: its fastest rank's. A host is slow when even its best rank is (throttled
// CPUs, half its memory bandwidth); one slow GPU among healthy ones is that rank's problem, and
// is named as a rank.
double host_figure(const std::vector<RankSamples>& ranks, const std::string& host, const std::string& metric) {
  double best = 0;
  for (const auto& r : ranks) {
    if (r.host == host) best = std::max(best, rank_figure(r, metric));
  }
  return best;
}

std::vector<int> ranks_on(const std::vector<RankSamples>& ranks, const std::string& host) {
  std::vector<int> out;
  for (const auto& r : ranks) {
    if (r.host == host) out.push_back(r.rank);
  }
  return out;
}

int fewest_trials(const std::vector<Metric>& metrics, const std::vector<RankSamples>& ranks) {
  int fewest = -1;
  for (const auto& r : ranks) {
    for (const auto& m : metrics) {
      const auto it = r.trials.find(m.key);
      const int n = it == r.trials.end() ? 0 : static_cast<int>(it->second.size());
      fewest = fewest < 0 ? n : std::min(fewest, n);
    }
  }
  return std::max(fewest, 0);
}

// This figure over the median of the others' (1.00: like its peers; 0.50: half as fast).
double vs_peers(const std::vector<double>& figures, size_t i) {
  std::vector<double> others;
  for (size_t j = 0; j < figures.size(); ++j) {
    if (j != i) others.push_back(figures[j]);
  }
  const double m = median(others);
  return m > 0 ? figures[i] / m : 0;
}

const Metric& metric_named(const std::vector<Metric>& metrics, const std::string& key) {
  for (const auto& m : metrics) {
    if (m.key == key) return m;
  }
  return metrics.front();
}

}  // namespace

double rank_figure(const RankSamples& r, const std::string& metric) {
  const auto it = r.trials.find(metric);
  return it == r.trials.end() || it->second.empty() ? 0 : *std::max_element(it->second.begin(), it->second.end());
}

Verdict judge(const std::vector<Metric>& metrics, const std::vector<RankSamples>& ranks, const OutlierRule& rule) {
  Verdict v;
  if (ranks.size() < 2) {
    v.inconclusive = "one rank: nobody to compare it with";
    return v;
  }
  if (const int n = fewest_trials(metrics, ranks); n < kMinTrials) {
    v.inconclusive = std::to_string(n) + " trial(s) per metric: at least " + std::to_string(kMinTrials) +
                     " are needed before a rank is named";
    return v;
  }
  const std::vector<std::string> hosts = hosts_in_order(ranks);
  for (const auto& m : metrics) {
    std::vector<double> figures;
    for (const auto& r : ranks) figures.push_back(rank_figure(r, m.key));
    for (const Outlier& o : low_outliers(figures, rule)) {
      const RankSamples& r = ranks[o.index];
      v.ranks.push_back({m.key, r.rank, r.local_rank, r.host, o.value, o.peer_median, o.threshold});
    }
    if (hosts.size() < 2) continue;
    std::vector<double> host_figures;
    for (const auto& h : hosts) host_figures.push_back(host_figure(ranks, h, m.key));
    for (const Outlier& o : low_outliers(host_figures, rule)) {
      v.hosts.push_back({m.key, hosts[o.index], ranks_on(ranks, hosts[o.index]), o.value, o.peer_median, o.threshold});
    }
  }
  return v;
}

std::string format_report(const std::string& probe, const std::vector<Metric>& metrics,
                          const std::vector<RankSamples>& ranks, const Verdict& verdict, const OutlierRule& rule) {
  std::ostringstream out;
  const std::vector<std::string> hosts = hosts_in_order(ranks);
  const int trials = fewest_trials(metrics, ranks);
  out << printf_text("# ddx probe %s: %zu rank%s on %zu host%s, %d trials per metric; a rank or host is named when its "
                     "best trial is below %.2f x its peers' median (margin %.0f%%) and below their spread\n",
                     probe.c_str(), ranks.size(), ranks.size() == 1 ? "" : "s", hosts.size(),
                     hosts.size() == 1 ? "" : "s", trials, 1 - rule.margin, rule.margin * 100);
  out << printf_text("# %-16s %-8s %5s %-14s %5s %10s %10s %10s %8s\n", "metric", "unit", "rank", "host", "local",
                     "best", "median", "min", "vs peers");
  for (const auto& m : metrics) {
    std::vector<double> figures;
    for (const auto& r : ranks) figures.push_back(rank_figure(r, m.key));
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto it = ranks[i].trials.find(m.key);
      const std::vector<double> none;
      const std::vector<double>& t = it == ranks[i].trials.end() ? none : it->second;
      const double lo = t.empty() ? 0 : *std::min_element(t.begin(), t.end());
      out << printf_text("  %-16s %-8s %5d %-14s %5d %10.4g %10.4g %10.4g %8.2f\n", m.label.c_str(), m.unit.c_str(),
                         ranks[i].rank, ranks[i].host.c_str(), ranks[i].local_rank, figures[i], median(t), lo,
                         ranks.size() > 1 ? vs_peers(figures, i) : 1.0);
    }
  }
  if (hosts.size() > 1) {
    out << printf_text("# per host: %-16s %-8s %-14s %-12s %10s %10s %8s\n", "metric", "unit", "host", "ranks",
                       "best rank", "sum", "vs peers");
    for (const auto& m : metrics) {
      std::vector<double> figures;
      for (const auto& h : hosts) figures.push_back(host_figure(ranks, h, m.key));
      for (size_t i = 0; i < hosts.size(); ++i) {
        double sum = 0;
        for (const auto& r : ranks) {
          if (r.host == hosts[i]) sum += rank_figure(r, m.key);
        }
        out << printf_text("  %-16s %-8s %-14s %-12s %10.4g %10.4g %8.2f\n", m.label.c_str(), m.unit.c_str(),
                           hosts[i].c_str(), ranks_text(ranks_on(ranks, hosts[i])).c_str(), figures[i], sum,
                           vs_peers(figures, i));
      }
    }
  }
  for (const auto& f : verdict.hosts) {
    const Metric& m = metric_named(metrics, f.metric);
    out << printf_text("SLOW HOST %s (%s): %s %.4g %s on its best rank, other hosts' median %.4g, named below %.4g\n",
                       f.host.c_str(), ranks_text(f.ranks).c_str(), m.label.c_str(), f.value, m.unit.c_str(),
                       f.peer_median, f.threshold);
  }
  for (const auto& f : verdict.ranks) {
    const Metric& m = metric_named(metrics, f.metric);
    out << printf_text("SLOW rank %d (host %s, local rank %d): %s %.4g %s, peers' median %.4g, named below %.4g\n",
                       f.rank, f.host.c_str(), f.local_rank, m.label.c_str(), f.value, m.unit.c_str(), f.peer_median,
                       f.threshold);
  }
  out << printf_text("%s: %zu rank%s x %zu metric%s, %d trials: ", probe.c_str(), ranks.size(),
                     ranks.size() == 1 ? "" : "s", metrics.size(), metrics.size() == 1 ? "" : "s", trials);
  if (!verdict.inconclusive.empty()) {
    out << "nobody judged (" << verdict.inconclusive << ")\n";
  } else if (verdict.passed()) {
    out << "no slow rank or host\n";
  } else {
    // Each named host and rank once, on its worst metric (the lowest figure against its peers),
    // with the figures that condemn it: the line validate shows for the stage.
    std::map<std::string, const HostFlag*> worst_host;
    for (const auto& f : verdict.hosts) {
      const HostFlag*& w = worst_host[f.host];
      if (!w || f.value / f.peer_median < w->value / w->peer_median) w = &f;
    }
    std::map<int, const RankFlag*> worst_rank;
    for (const auto& f : verdict.ranks) {
      const RankFlag*& w = worst_rank[f.rank];
      if (!w || f.value / f.peer_median < w->value / w->peer_median) w = &f;
    }
    std::vector<std::string> named;
    for (const auto& [host, f] : worst_host) {
      const Metric& m = metric_named(metrics, f->metric);
      named.push_back(printf_text("host %s (%s): %s %.4g %s on its best rank, other hosts' median %.4g", host.c_str(),
                                  ranks_text(f->ranks).c_str(), m.label.c_str(), f->value, m.unit.c_str(), f->peer_median));
    }
    for (const auto& [rank, f] : worst_rank) {
      const Metric& m = metric_named(metrics, f->metric);
      named.push_back(printf_text("rank %d (%s, local rank %d): %s %.4g %s, peers' median %.4g", rank, f->host.c_str(),
                                  f->local_rank, m.label.c_str(), f->value, m.unit.c_str(), f->peer_median));
    }
    out << "SLOW: " << join(named, "; ") << printf_text(" (margin %.0f%%)", rule.margin * 100) << "\n";
  }
  return out.str();
}

nlohmann::json to_json(const std::string& probe, const std::vector<Metric>& metrics,
                       const std::vector<RankSamples>& ranks, const Verdict& verdict, const OutlierRule& rule) {
  using nlohmann::json;
  json j = {{"probe", probe},
            {"schema", 1},
            {"world_size", ranks.size()},
            {"hosts", hosts_in_order(ranks)},
            {"passed", verdict.passed()},
            {"rule", {{"margin", rule.margin}, {"mad_factor", rule.mad_factor}, {"min_trials", kMinTrials}}}};
  if (!verdict.inconclusive.empty()) j["inconclusive"] = verdict.inconclusive;
  json ms = json::array();
  for (const auto& m : metrics) ms.push_back({{"key", m.key}, {"label", m.label}, {"unit", m.unit}});
  j["metrics"] = ms;
  json rs = json::array();
  for (const auto& r : ranks) {
    json figures = json::object();
    for (const auto& m : metrics) {
      const auto it = r.trials.find(m.key);
      figures[m.key] = {{"best", rank_figure(r, m.key)}, {"median", it == r.trials.end() ? 0.0 : median(it->second)},
                        {"trials", it == r.trials.end() ? std::vector<double>{} : it->second}};
    }
    rs.push_back({{"rank", r.rank}, {"local_rank", r.local_rank}, {"host", r.host}, {"device", r.device},
                  {"metrics", figures}});
  }
  j["ranks"] = rs;
  json per_host = json::array();
  for (const auto& h : hosts_in_order(ranks)) {
    json figures = json::object();
    for (const auto& m : metrics) {
      double sum = 0;
      for (const auto& r : ranks) {
        if (r.host == h) sum += rank_figure(r, m.key);
      }
      figures[m.key] = {{"best_rank", host_figure(ranks, h, m.key)}, {"sum", sum}};
    }
    per_host.push_back({{"host", h}, {"ranks", ranks_on(ranks, h)}, {"metrics", figures}});
  }
  j["per_host"] = per_host;
  json slow_ranks = json::array(), slow_hosts = json::array();
  for (const auto& f : verdict.ranks) {
    slow_ranks.push_back({{"metric", f.metric}, {"rank", f.rank}, {"host", f.host}, {"local_rank", f.local_rank},
                          {"value", f.value}, {"peer_median", f.peer_median}, {"threshold", f.threshold}});
  }
  for (const auto& f : verdict.hosts) {
    slow_hosts.push_back({{"metric", f.metric}, {"host", f.host}, {"ranks", f.ranks}, {"value", f.value},
                          {"peer_median", f.peer_median}, {"threshold", f.threshold}});
  }
  j["slow_ranks"] = slow_ranks;
  j["slow_hosts"] = slow_hosts;
  return j;
}

}  // namespace ddx::node
