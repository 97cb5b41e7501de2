// JSON in the layout of nccl-tests' -J output (version 3: config, devices, results[] with
// out_of_place/in_place {time, alg_bw, bus_bw, nwrong}, *_per_iter, out_of_bounds,
// average_bus_bandwidth), so existing parsers such as analyze_perf_json.py keep working. ddx's
// additions live under "ddx" keys. Unlike nccl-tests, `env` holds only the variables that shape
// a distributed run (launcher, NCCL, Gloo, MPI, CUDA), not the whole environment, which may
// hold secrets.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "bandwidth/report.h"
#include "ddx/processes/env.h"
#include "faults/faults.h"

namespace ddx::bw {
namespace {

using nlohmann::json;

json relevant_env() {
  static const char* prefixes[] = {"RANK", "WORLD_SIZE", "LOCAL_", "GROUP_", "MASTER_", "TORCHELASTIC_",
                                   "SLURM_", "PMI_", "MPI_", "OMPI_", "NCCL_", "GLOO_", "CUDA_",
                                   "OMP_", "DDX_"};
  json env = json::array();
  for (const auto& [key, value] : current_env()) {
    for (const char* p : prefixes) {
      if (key.rfind(p, 0) == 0) {
        env.push_back(key + "=" + value);
        break;
      }
    }
  }
  return env;
}

json devices(const std::vector<RankInfo>& ranks) {
  json out = json::array();
  for (const auto& r : ranks) {
    out.push_back({{"rank", r.rank}, {"group", 0}, {"pid", r.pid}, {"hostname", r.host},
                   {"device", r.device}, {"device_hex", r.bus_id}, {"device_info", r.device_name},
                   {"ddx", {{"local_rank", r.local_rank}}}});
  }
  return out;
}

json config(const BandwidthOptions& o, size_t max_bytes) {
  json c = {{"nthreads", 1}, {"ngpus", 1}, {"minimum_bytes", std::min(o.min_bytes, max_bytes)},
            {"maximum_bytes", max_bytes}, {"warmup_iters", o.warmup_iters}, {"iterations", o.iters},
            {"aggregated_iterations", 1}, {"validation", o.check_iters}, {"graph", 0},
            {"blocking_collectives", o.blocking}, {"per_iter_timing", 1}, {"per_iter_skip", 0},
            {"parallel_init", 0}};
  if (o.step_factor > 1) {
    c["step_factor"] = o.step_factor;
  } else {
    c["step_bytes"] = o.step_bytes;
  }
  return c;
}

json placement(const PlacementResult& r) {
  if (!r.measured) return nullptr;
  return {{"time", r.time_us}, {"alg_bw", r.algbw}, {"bus_bw", r.busbw},
          {"nwrong", r.checked ? json(static_cast<double>(r.wrong)) : json(nullptr)}};
}

json per_iter(const PlacementResult& r) {
  if (!r.measured) return nullptr;
  return {{"skipped_iterations", 0}, {"min_us", r.iter.min}, {"max_us", r.iter.max},
          {"avg_us", r.iter.avg}, {"p50_us", r.iter.p50}, {"p95_us", r.iter.p95},
          {"p99_us", r.iter.p99}, {"stdev_us", r.iter.stdev}, {"cv_pct", r.iter.cv_pct()},
          {"times_us", r.iter_us}};
}

json ddx_placement(const PlacementResult& r, const std::vector<RankInfo>& ranks) {
  if (!r.measured) return nullptr;
  json j = {{"rank_time_us", r.rank_time_us}, {"slowest_rank", r.slowest_rank}};
  if (r.slowest_rank < static_cast<int>(ranks.size())) {
    j["slowest_host"] = ranks[r.slowest_rank].host;
    j["slowest_local_rank"] = ranks[r.slowest_rank].local_rank;
  }
  if (r.wrong > 0) {
    j["first_wrong"] = {{"rank", r.first_wrong_rank}, {"element", r.first_wrong_index},
                        {"got", r.got}, {"expected", r.expected}};
  }
  return j;
}

}  // namespace

std::string sweep_json(const SweepReport& report, const BandwidthOptions& o,
                       const std::vector<CollectiveVerdict>& verdicts, const std::string& start_time,
                       const std::string& end_time) {
  json results = json::array();
  for (const Row& row : report.rows) {
    char root[16];
    std::snprintf(root, sizeof(root), "%6i", row.root);  // nccl-tests writes the padded text
    json entry = {{"size", row.size}, {"count", row.count}, {"type", name(row.type)},
                  {"redop", name(row.op)}, {"root", root},
                  {"out_of_place", placement(row.out_of_place)},
                  {"in_place", placement(row.in_place)},
                  {"out_of_place_per_iter", per_iter(row.out_of_place)},
                  {"in_place_per_iter", per_iter(row.in_place)},
                  {"actual_iterations", o.iters}, {"experiment_name", perf_name(row.collective)},
                  {"ddx", {{"collective", name(row.collective)},
                           {"out_of_place", ddx_placement(row.out_of_place, report.ranks)},
                           {"in_place", ddx_placement(row.in_place, report.ranks)}}}};
    results.push_back(entry);
  }
  int wrong = 0;
  double busbw_sum = 0;
  int measured = 0;
  bool busbw_ok = true;
  json per_collective = json::array();
  for (const auto& v : verdicts) {
    wrong += v.wrong_results;
    busbw_sum += v.avg_busbw * v.results;
    measured += v.results;
    busbw_ok = busbw_ok && v.busbw_ok;
    per_collective.push_back({{"collective", name(v.collective)}, {"average_bus_bandwidth", v.avg_busbw},
                              {"out_of_bounds", v.wrong_results}, {"wrong_elements", v.wrong_elements},
                              {"busbw_okay", v.busbw_ok}});
  }
  json doc = {{"version", 3},
              {"injected_faults", faults::report_entry()},
              {"start_time", start_time},
              {"args", o.args},
              {"env", relevant_env()},
              {"nccl_version", 0},
              {"config", config(o, report.max_bytes)},
              {"devices", devices(report.ranks)},
              {"results", results},
              {"out_of_bounds", {{"count", wrong}, {"okay", wrong == 0}}},
              {"average_bus_bandwidth",
               {{"bandwidth", measured ? busbw_sum / measured : 0.0}, {"okay", busbw_ok}}},
              {"errors", json::array()},
              {"end_time", end_time},
              {"ddx", {{"engine", report.engine}, {"nranks", report.nranks}, {"notes", report.notes},
                       {"min_busbw", o.min_busbw ? json(*o.min_busbw) : json(nullptr)},
                       {"collectives", per_collective}}}};
  return doc.dump(1) + "\n";
}

std::string pairs_json(const PairReport& report, const BandwidthOptions& o) {
  json pairs = json::array();
  for (const auto& p : report.pairs) {
    pairs.push_back({{"a", p.a}, {"b", p.b}, {"time_us", p.time_us}, {"bw", p.gbs}, {"nwrong", p.wrong}});
  }
  json slow_links = json::array();
  for (const auto& p : report.slow_links) slow_links.push_back({{"a", p.a}, {"b", p.b}, {"bw", p.gbs}});
  json rechecked = json::array();
  for (const auto& [link, in_rounds] : report.rechecked) {
    rechecked.push_back({{"a", link.a}, {"b", link.b}, {"bw_in_rounds", in_rounds}, {"bw", link.gbs}});
  }
  json slow_ranks = json::array();
  for (const auto& [rank, gbs] : report.slow_ranks) {
    json s = {{"rank", rank}, {"median_link_bw", gbs}};
    if (rank < static_cast<int>(report.ranks.size())) {
      s["host"] = report.ranks[rank].host;
      s["local_rank"] = report.ranks[rank].local_rank;
    }
    slow_ranks.push_back(s);
  }
  json doc = {{"version", 3},
              {"injected_faults", faults::report_entry()},
              {"args", o.args},
              {"devices", devices(report.ranks)},
              {"ddx", {{"mode", "pairs"}, {"engine", report.engine}, {"nranks", report.nranks},
                       {"bytes", report.bytes}, {"iterations", report.iters}, {"pairs", pairs},
                       {"matrix_gbs", report.matrix}, {"median_bw", report.median_gbs},
                       {"slow_links", slow_links}, {"slow_ranks", slow_ranks}, {"rechecked", rechecked},
                       {"nwrong", report.wrong}, {"okay", exit_code(report) == 0}}}};
  return doc.dump(1) + "\n";
}

}  // namespace ddx::bw
