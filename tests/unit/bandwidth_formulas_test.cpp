// ddx probe bandwidth without processes: every byte count and bus factor against values worked
// out by hand from nccl-tests' formulas, the exact-data checks against an independent host
// simulation of each collective, sizes, statistics, table formatting, the pairwise schedule and
// analysis, and the report writers. No wall-clock assertions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <set>

#include "bandwidth/collective.h"
#include "bandwidth/harness.h"
#include "bandwidth/host_memory.h"
#include "bandwidth/pairwise.h"
#include "bandwidth/report.h"
#include "bandwidth/sizes.h"
#include "bandwidth/stats.h"
#include "bandwidth/verifiable.h"
#include "ddx/errors/errors.h"
#include "ddx/text/svg_plot.h"

namespace ddx::bw {
namespace {

constexpr size_t k4MiB = 4194304;  // 1 Mi floats

// --- byte counts and bus factors (hand-computed: 4 MiB of floats, 4 ranks, 1 ms) ---

TEST(BandwidthFormulas, AllReduceCountsEveryByteAndTwoNMinusOneOverN) {
  const auto& d = all_reduce_def();
  Geometry g = d.geometry(k4MiB, 4, 4, 0);
  EXPECT_EQ(g.count, 1048576u);
  EXPECT_EQ(printed_size(g, 4), k4MiB);
  // 4194304 B / 1e9 / 1e-3 s = 4.194304 GB/s; x 2*3/4 = 6.291456.
  EXPECT_DOUBLE_EQ(algbw_gbs(d, g.count, 4, 4, 1e-3), 4.194304);
  EXPECT_DOUBLE_EQ(busbw_gbs(d, g.count, 4, 4, 1e-3), 6.291456);
  EXPECT_DOUBLE_EQ(d.bus_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(d.bus_factor(1), 0.0);  // one rank moves nothing over a bus
}

TEST(BandwidthFormulas, AllGatherCountsTheWholeOutput) {
  const auto& d = all_gather_def();
  Geometry g = d.geometry(k4MiB, 4, 4, 2);
  EXPECT_EQ(g.count, 262144u);       // per-rank block
  EXPECT_EQ(g.send_count, 262144u);
  EXPECT_EQ(g.recv_count, 1048576u);
  EXPECT_EQ(g.inplace_in, 2u * 262144u);  // rank 2's block, in place
  EXPECT_EQ(printed_size(g, 4), k4MiB);
  EXPECT_DOUBLE_EQ(algbw_gbs(d, g.count, 4, 4, 1e-3), 4.194304);
  EXPECT_DOUBLE_EQ(busbw_gbs(d, g.count, 4, 4, 1e-3), 3.145728);  // x 3/4
}

TEST(BandwidthFormulas, ReduceScatterCountsTheWholeInput) {
  const auto& d = reduce_scatter_def();
  Geometry g = d.geometry(k4MiB, 4, 4, 3);
  EXPECT_EQ(g.count, 262144u);
  EXPECT_EQ(g.send_count, 1048576u);
  EXPECT_EQ(g.recv_count, 262144u);
  EXPECT_EQ(g.inplace_out, 3u * 262144u);
  EXPECT_DOUBLE_EQ(busbw_gbs(d, g.count, 4, 4, 1e-3), 3.145728);
}

TEST(BandwidthFormulas, BlocksAreRoundedDownTo16Bytes) {
  // 100 int8 over 3 ranks: 33 per rank, rounded down to a multiple of 16 elements.
  EXPECT_EQ(aligned_block_count(100, 1, 3), 32u);
  // 500 halves over 4 ranks: 125, rounded down to a multiple of 8.
  EXPECT_EQ(aligned_block_count(500, 2, 4), 120u);
  // doubles: multiples of 2.
  EXPECT_EQ(aligned_block_count(7, 8, 2), 2u);
  Geometry g = all_gather_def().geometry(100, 1, 3, 0);
  EXPECT_EQ(printed_size(g, 1), 96u);
  EXPECT_EQ(all_gather_def().geometry(8, 4, 4, 0).count, 0u);  // too small: skipped
}

TEST(BandwidthFormulas, AllToAllCountsNBlocks) {
  const auto& d = alltoall_def();
  Geometry g = d.geometry(k4MiB, 4, 4, 1);
  EXPECT_EQ(g.count, 262144u);
  EXPECT_EQ(g.send_count, 1048576u);
  EXPECT_DOUBLE_EQ(algbw_gbs(d, g.count, 4, 4, 1e-3), 4.194304);
  EXPECT_DOUBLE_EQ(busbw_gbs(d, g.count, 4, 4, 1e-3), 3.145728);
  EXPECT_FALSE(d.in_place);
}

TEST(BandwidthFormulas, RootedOpsAndSendRecvHaveFactorOne) {
  for (const CollectiveDef* d : {&broadcast_def(), &reduce_def(), &sendrecv_def()}) {
    Geometry g = d->geometry(k4MiB, 4, 8, 0);
    EXPECT_EQ(g.count, 1048576u);
    EXPECT_DOUBLE_EQ(algbw_gbs(*d, g.count, 4, 8, 2e-3), 2.097152);
    EXPECT_DOUBLE_EQ(busbw_gbs(*d, g.count, 4, 8, 2e-3), 2.097152);
  }
  EXPECT_TRUE(broadcast_def().rooted);
  EXPECT_TRUE(reduce_def().rooted);
  EXPECT_FALSE(reduce_def().has_output(1, 0));
  EXPECT_TRUE(reduce_def().has_output(0, 0));
}

TEST(BandwidthFormulas, ZeroTimeGivesZeroNotInfinity) {
  EXPECT_EQ(busbw_gbs(all_reduce_def(), 1024, 4, 4, 0.0), 0.0);
}

TEST(BandwidthFormulas, NamesMatchNcclTests) {
  EXPECT_EQ(perf_name(Collective::AllReduce), "all_reduce_perf");
  EXPECT_EQ(perf_name(Collective::AllToAll), "alltoall_perf");
  EXPECT_EQ(*parse_datatype("fp16"), DataType::Half);
  EXPECT_EQ(*parse_datatype("float32"), DataType::Float);
  EXPECT_EQ(*parse_collective("allreduce"), Collective::AllReduce);
  EXPECT_FALSE(parse_redop("mulsum").has_value());
  EXPECT_EQ(element_size(DataType::BFloat16), 2u);
}

// --- exact data: an independent host simulation of each collective must pass the check ---

struct Sim {
  DataType type;
  RedOp op;
  int n;
  size_t bytes;
  int root = 0;
};

// Inputs of every rank for a collective, as the probe writes them.
std::vector<std::vector<char>> inputs(const CollectiveDef& d, const Sim& s, int rep) {
  std::vector<std::vector<char>> in(s.n);
  const size_t elt = element_size(s.type);
  for (int r = 0; r < s.n; ++r) {
    Geometry g = d.geometry(s.bytes, elt, s.n, r);
    in[r].assign(g.send_count * elt, 0);
    fill_input({s.type, s.op, s.n, rep}, r, g.send_count, in[r].data());
  }
  return in;
}

double fold(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::Prod: return a * b;
    case RedOp::Min: return std::min(a, b);
    case RedOp::Max: return std::max(a, b);
    default: return a + b;
  }
}

// What rank r must receive, computed from the typed input buffers with the op's semantics
// (not from CollectiveDef::source), element by element in the type.
std::vector<char> simulate(Collective c, const Sim& s, const std::vector<std::vector<char>>& in, int r) {
  const size_t elt = element_size(s.type);
  const auto& d = definition(c);
  Geometry g = d.geometry(s.bytes, elt, s.n, r);
  std::vector<char> out(g.recv_count * elt, 0);
  auto reduce_at = [&](size_t index) {
    double acc = load_element(s.type, in[0].data(), index);
    for (int q = 1; q < s.n; ++q) acc = round_trip(s.type, fold(s.op, acc, load_element(s.type, in[q].data(), index)));
    if (s.op == RedOp::Avg) acc = acc / s.n;
    return acc;
  };
  for (size_t k = 0; k < g.recv_count; ++k) {
    double v = 0;
    switch (c) {
      case Collective::AllReduce: v = reduce_at(k); break;
      case Collective::Reduce: v = reduce_at(k); break;
      case Collective::ReduceScatter: v = reduce_at(r * g.count + k); break;
      case Collective::AllGather: v = load_element(s.type, in[k / g.count].data(), k % g.count); break;
      case Collective::Broadcast: v = load_element(s.type, in[s.root].data(), k); break;
      case Collective::AllToAll: v = load_element(s.type, in[k / g.count].data(), r * g.count + k % g.count); break;
      case Collective::SendRecv: v = load_element(s.type, in[(r - 1 + s.n) % s.n].data(), k); break;
    }
    store_element(s.type, out.data(), k, v);
  }
  return out;
}

void expect_simulation_passes(Collective c, const Sim& s) {
  const auto& d = definition(c);
  for (int rep = 0; rep < 2; ++rep) {
    auto in = inputs(d, s, rep);
    for (int r = 0; r < s.n; ++r) {
      if (!d.has_output(r, s.root)) continue;
      Geometry g = d.geometry(s.bytes, element_size(s.type), s.n, r);
      std::vector<char> out = simulate(c, s, in, r);
      DataPattern p{s.type, s.op, s.n, rep};
      CheckOutcome ok = check_output(d, g, p, r, s.root, out.data());
      EXPECT_EQ(ok.wrong, 0) << name(c) << " " << name(s.type) << " " << name(s.op) << " rank " << r << " first "
                             << ok.first << " got " << ok.got << " expected " << ok.expected;
      // A corrupted element is counted, at its offset.
      const size_t at = g.recv_count / 2;
      store_element(s.type, out.data(), at, load_element(s.type, out.data(), at) + 1);
      CheckOutcome bad = check_output(d, g, p, r, s.root, out.data());
      EXPECT_EQ(bad.wrong, 1) << name(c) << " " << name(s.type);
      EXPECT_EQ(bad.first, static_cast<int64_t>(at));
    }
  }
}

TEST(BandwidthData, EveryCollectiveSimulatedOnTheHostPasses) {
  for (Collective c : all_collectives()) {
    expect_simulation_passes(c, {DataType::Float, RedOp::Sum, 4, 4096, 1});
    expect_simulation_passes(c, {DataType::Int32, RedOp::Sum, 3, 3000, 2});
  }
}

TEST(BandwidthData, ReductionsAreExactInEveryType) {
  for (DataType t : all_datatypes()) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max}) {
      expect_simulation_passes(Collective::AllReduce, {t, op, 5, 2048});
    }
  }
  // bfloat16 holds integers exactly only up to 256: 16 ranks' sums must stay below.
  expect_simulation_passes(Collective::AllReduce, {DataType::BFloat16, RedOp::Sum, 16, 1024});
  expect_simulation_passes(Collective::ReduceScatter, {DataType::Half, RedOp::Sum, 16, 4096});
  // int8 sums wrap the same way on every engine.
  expect_simulation_passes(Collective::AllReduce, {DataType::Int8, RedOp::Sum, 16, 1024});
  // avg (floating point only) within 2 ULP.
  expect_simulation_passes(Collective::AllReduce, {DataType::Float, RedOp::Avg, 3, 1024});
  expect_simulation_passes(Collective::AllReduce, {DataType::BFloat16, RedOp::Avg, 7, 1024});
}

TEST(BandwidthData, ValuesStayWithinExactRange) {
  DataPattern bf16{DataType::BFloat16, RedOp::Sum, 64, 0};
  EXPECT_EQ(value_modulus(bf16), 5);  // 4 x 64 = 256
  DataPattern f{DataType::Float, RedOp::Sum, 64, 0};
  EXPECT_EQ(value_modulus(f), 13);
  DataPattern prod{DataType::Half, RedOp::Prod, 1000, 3};
  int twos = 0;
  for (int r = 0; r < 1000; ++r) twos += input_value(prod, r, 17) == 2;
  EXPECT_LE(twos, 1);  // products are 1 or 2
}

TEST(BandwidthData, HalfAndBfloat16Conversions) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);  // overflow to infinity
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie rounds to even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(half_to_float(0x0001), 5.9604644775390625e-08f);  // smallest subnormal
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 1.0f / 256), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_FLOAT_EQ(bfloat16_to_float(0x4049), 3.140625f);
  for (int i = 0; i <= 2048; ++i) EXPECT_EQ(half_to_float(float_to_half(static_cast<float>(i))), i);
}

// --- sizes, statistics, formatting ---

TEST(BandwidthSizes, BinarySuffixesAndErrors) {
  EXPECT_EQ(parse_bytes("-b", "8"), 8u);
  EXPECT_EQ(parse_bytes("-b", "128K"), 131072u);
  EXPECT_EQ(parse_bytes("-e", "32M"), 33554432u);
  EXPECT_EQ(parse_bytes("-e", "8G"), 8589934592u);
  EXPECT_THROW(parse_bytes("-b", "1X"), UsageError);
  EXPECT_THROW(parse_bytes("-b", "abc"), UsageError);
  EXPECT_THROW(parse_bytes("-b", ""), UsageError);
  try {
    parse_bytes("-b/--minbytes", "12Q");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-b/--minbytes '12Q'"), std::string::npos);
  }
  EXPECT_EQ(format_bytes(33554432), "32M");
  EXPECT_EQ(format_bytes(1000), "1000");
}

TEST(BandwidthSizes, FactorAndStepSweeps) {
  EXPECT_EQ(sweep_sizes(8, 128, 2, 1 << 20), (std::vector<size_t>{8, 16, 32, 64, 128}));
  EXPECT_EQ(sweep_sizes(8, 100, 2, 0), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep_sizes(1 << 20, 4 << 20, 1, 1 << 20),
            (std::vector<size_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  EXPECT_EQ(sweep_sizes(32 << 20, 32 << 20, 1, 1 << 20), (std::vector<size_t>{32 << 20}));
  EXPECT_TRUE(sweep_sizes(10, 5, 2, 1).empty());
}

TEST(BandwidthStats, NcclTestsPercentiles) {
  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);
  IterStats s = iter_stats(twenty);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 20);
  EXPECT_EQ(s.p50, 11);   // sorted[n/2]
  EXPECT_EQ(s.p99, 20);   // nearest rank: with 20 samples p99 is the max
  EXPECT_EQ(s.p95, 19);
  EXPECT_DOUBLE_EQ(s.avg, 10.5);
  EXPECT_EQ(percentile_index(100, 99), 98);
  EXPECT_EQ(median({3, 1, 2, 10}), 2.5);
  EXPECT_EQ(max_over_ranks({{1, 5, 2}, {4, 1}}), (std::vector<double>{4, 5, 2}));
}

TEST(BandwidthReport, NumbersFitTheirColumnsLikeNcclTests) {
  EXPECT_EQ(fit_number(339.61, 7), " 339.61");
  EXPECT_EQ(fit_number(3.09, 6), "  3.09");
  EXPECT_EQ(fit_number(0, 6), "  0.00");
  EXPECT_EQ(fit_number(1234.56, 6), "1234.6");
  EXPECT_EQ(fit_number(123456, 6), "123456");
  EXPECT_EQ(fit_number(12345678, 6), "1.2e+07");
}

Row sample_row() {
  Row row;
  row.collective = Collective::AllReduce;
  row.type = DataType::Float;
  row.op = RedOp::Sum;
  row.root = -1;
  row.size = 1048576;
  row.count = 262144;
  for (PlacementResult* r : {&row.out_of_place, &row.in_place}) {
    r->measured = r->checked = true;
    r->time_us = 339.61;
    r->algbw = 3.09;
    r->busbw = 3.09;
    r->rank_time_us = {330.0, 349.2};
    r->slowest_rank = 1;
    r->iter.p50 = 338.5;
    r->iter.p99 = 402.25;
  }
  row.in_place.time_us = 335.85;
  return row;
}

TEST(BandwidthReport, RowKeepsNcclTestsColumnsAndAppendsDdxOnes) {
  const std::string line = table_row(sample_row());
  EXPECT_EQ(line,
            "     1048576        262144     float     sum      -1   339.61    3.09    3.09       0   335.85    3.09    3.09"
            "       0   330.00   349.20       1   338.50   402.25");
  // Whitespace-split columns 0..12 are exactly nccl-tests'.
  std::istringstream in(line);
  std::vector<std::string> cols;
  for (std::string c; in >> c;) cols.push_back(c);
  ASSERT_EQ(cols.size(), 18u);
  EXPECT_EQ(cols[5], "339.61");
  EXPECT_EQ(cols[7], "3.09");
  EXPECT_EQ(cols[12], "0");
  auto header = table_header();
  ASSERT_EQ(header.size(), 3u);
  const std::string nccl_tests_columns =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong";
  EXPECT_EQ(header[1].substr(0, nccl_tests_columns.size()), nccl_tests_columns);
  EXPECT_EQ(header[0].find("out-of-place"), 63u);
  EXPECT_EQ(header[0].find("in-place"), 98u);
}

TEST(BandwidthReport, UncheckedAndUnmeasuredPrintNA) {
  Row row = sample_row();
  row.out_of_place.checked = false;
  row.in_place = PlacementResult{};
  const std::string line = table_row(row);
  EXPECT_NE(line.find("3.09     N/A      N/A     N/A     N/A     N/A"), std::string::npos) << line;
}

TEST(BandwidthReport, VerdictAndExitCode) {
  SweepReport report;
  report.rows = {sample_row()};
  BandwidthOptions o;
  auto v = evaluate(report, o);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].avg_busbw, 3.09);
  EXPECT_EQ(exit_code(v), 0);
  o.min_busbw = 3.1;
  EXPECT_EQ(exit_code(evaluate(report, o)), 1);
  o.min_busbw = 3.0;
  EXPECT_EQ(exit_code(evaluate(report, o)), 0);
  report.rows[0].in_place.wrong = 3;
  auto bad = evaluate(report, o);
  EXPECT_EQ(bad[0].wrong_results, 1);
  EXPECT_EQ(bad[0].wrong_elements, 3);
  EXPECT_EQ(exit_code(bad), 1);
}

TEST(BandwidthReport, JsonKeepsNcclTestsLayout) {
  SweepReport report;
  report.engine = "gloo";
  report.nranks = 2;
  report.ranks = {{0, 0, 11, "vm", 0, "cpu", "cpu"}, {1, 1, 12, "vm", 1, "cpu", "cpu"}};
  report.rows = {sample_row()};
  BandwidthOptions o;
  auto j = nlohmann::json::parse(sweep_json(report, o, evaluate(report, o), "a", "b"));
  EXPECT_EQ(j["version"], 3);
  const auto& r = j["results"][0];
  EXPECT_EQ(r["size"], 1048576);
  EXPECT_EQ(r["count"], 262144);
  EXPECT_EQ(r["type"], "float");
  EXPECT_EQ(r["redop"], "sum");
  EXPECT_EQ(r["root"], "    -1");  // nccl-tests writes the padded text
  EXPECT_DOUBLE_EQ(r["out_of_place"]["time"].get<double>(), 339.61);
  EXPECT_DOUBLE_EQ(r["in_place"]["bus_bw"].get<double>(), 3.09);
  EXPECT_EQ(r["out_of_place"]["nwrong"], 0.0);
  EXPECT_EQ(r["ddx"]["out_of_place"]["slowest_rank"], 1);
  EXPECT_EQ(r["out_of_place_per_iter"]["p99_us"], 402.25);
  EXPECT_EQ(j["out_of_bounds"]["okay"], true);
  EXPECT_EQ(j["devices"][1]["hostname"], "vm");
  const std::string csv = sweep_csv(report);
  EXPECT_NE(csv.find("all_reduce,1048576,262144,float,sum,-1,out_of_place,339.61"), std::string::npos) << csv;
}

TEST(BandwidthReport, PlotHasOnePanelPerCollective) {
  SweepReport report;
  report.engine = "gloo";
  report.nranks = 2;
  Row a = sample_row();
  Row b = sample_row();
  b.size = 2097152;
  Row c = sample_row();
  c.collective = Collective::AllGather;
  report.rows = {a, b, c};
  const std::string svg = sweep_svg(report);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("all_reduce (gloo, 2 ranks)"), std::string::npos);
  EXPECT_NE(svg.find("all_gather (gloo, 2 ranks)"), std::string::npos);
  EXPECT_NE(svg.find("out-of-place float sum"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find(">1M<"), std::string::npos);  // log-x ticks in binary units
}

TEST(SvgPlot, SkipsUnplottablePointsAndEscapesText) {
  svg::Panel p;
  p.title = "a < b & c";
  p.log_x = true;
  p.series.push_back({"s", {{0, 1}, {-1, 2}, {4, 3}, {8, NAN}}});
  const std::string out = svg::render({p});
  EXPECT_NE(out.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_EQ(out.find("nan"), std::string::npos);
  EXPECT_EQ(svg::short_number(1048576), "1M");
  EXPECT_EQ(svg::short_number(0.5), "0.5");
  svg::Panel empty;
  EXPECT_NE(svg::render({empty}).find("no data"), std::string::npos);
}

// --- pairwise ---

TEST(BandwidthPairs, RoundsAreDisjointAndCoverEveryPairOnce) {
  for (int n : {2, 3, 4, 5, 8, 9}) {
    auto rounds = pair_rounds(n);
    EXPECT_EQ(rounds.size(), static_cast<size_t>(n % 2 ? n : n - 1)) << n;
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "rank in two pairs of one round";
        EXPECT_TRUE(seen.insert({a, b}).second) << "pair measured twice";
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n * (n - 1) / 2)) << n;
  }
  EXPECT_EQ(partner_in_round({{0, 3}, {1, 2}}, 2), 1);
  EXPECT_EQ(partner_in_round({{0, 3}}, 1), -1);
}

TEST(BandwidthPairs, SlowRankAndSlowLinkAreNamed) {
  PairReport r;
  r.nranks = 4;
  for (const auto& round : pair_rounds(4)) {
    for (const auto& [a, b] : round) r.pairs.push_back({a, b, 100, (a == 2 || b == 2) ? 0.05 : 1.5, 0});
  }
  analyze_pairs(r, 0.5, 0);
  EXPECT_DOUBLE_EQ(r.matrix[0][2], 0.05);
  EXPECT_DOUBLE_EQ(r.matrix[3][1], 1.5);
  ASSERT_EQ(r.slow_ranks.size(), 1u);
  EXPECT_EQ(r.slow_ranks[0].first, 2);
  EXPECT_EQ(r.slow_links.size(), 3u);
  EXPECT_EQ(exit_code(r), 1);
  // One bad cable: a single slow link, no slow rank.
  PairReport one;
  one.nranks = 4;
  for (const auto& round : pair_rounds(4)) {
    for (const auto& [a, b] : round) one.pairs.push_back({a, b, 100, (a == 0 && b == 1) ? 0.2 : 1.5, 0});
  }
  analyze_pairs(one, 0.5, 0);
  EXPECT_TRUE(one.slow_ranks.empty());
  ASSERT_EQ(one.slow_links.size(), 1u);
  EXPECT_EQ(one.slow_links[0].a, 0);
  EXPECT_EQ(one.slow_links[0].b, 1);
  // Three ranks, one slow: it owns two of the three links, and is still the one named.
  PairReport three;
  three.nranks = 3;
  three.pairs = {{0, 1, 100, 1.5, 0}, {0, 2, 100, 0.01, 0}, {1, 2, 100, 0.012, 0}};
  analyze_pairs(three, 0.5, 0);
  ASSERT_EQ(three.slow_ranks.size(), 1u);
  EXPECT_EQ(three.slow_ranks[0].first, 2);
  EXPECT_DOUBLE_EQ(three.median_gbs, 1.5);
  EXPECT_EQ(three.slow_links.size(), 2u);
  // An absolute floor flags everything below it.
  analyze_pairs(one, 0.5, 2.0);
  EXPECT_EQ(one.slow_links.size(), 6u);
  one.ranks = {{0, 0, 1, "h0", 0, "cpu", "cpu"}, {1, 1, 2, "h0", 1, "cpu", "cpu"},
               {2, 0, 3, "h1", 0, "cpu", "cpu"}, {3, 1, 4, "h1", 1, "cpu", "cpu"}};
  analyze_pairs(one, 0.5, 0);
  BandwidthOptions o;
  const std::string text = pairs_text(one, o);
  EXPECT_NE(text.find("0 <-> 1"), std::string::npos) << text;
  EXPECT_NE(text.find("h0:0 <-> h0:1"), std::string::npos) << text;
}

// --- memory, perturbation ---

TEST(BandwidthMemory, LargeSizesAreReducedWithANote) {
  std::string note;
  EXPECT_EQ(fit_max_bytes(1 << 20, {8 << 20, 4 << 20}, &note), 1u << 20);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(fit_max_bytes(size_t{1} << 40, {(512u << 20) + 100, size_t{2} << 30}, &note), (512u << 20) + 64);
  EXPECT_EQ(note, "Reducing maxBytes to 536870976 due to memory limitation");
  // 10 GiB for 2 ranks: 5 GiB each, 80 % of it over 3 buffers.
  EXPECT_EQ(host_buffer_budget(size_t{10} << 30, 2), (size_t{5} << 30) / 5 * 4 / 3);
}

// Without the host-memory test switch the probe reads /proc/meminfo (the switch's strict parsing
// is tested with the fault grammar in fault_specs_test).
TEST(BandwidthMemory, ReadsMemAvailable) { EXPECT_GT(available_host_memory(), 0u); }

// Fault specs name ops as the collective layer records them; a sendrecv sends, then receives.
TEST(BandwidthFaults, RecordNamesAndCorruption) {
  EXPECT_STREQ(record_name(Collective::SendRecv, true), "send");
  EXPECT_STREQ(record_name(Collective::SendRecv, false), "recv");
  EXPECT_STREQ(record_name(Collective::AllToAll, false), "all_to_all");
  float out[2] = {3, 4};
  add_one_to_first(DataType::Float, out, 2);
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], 4);
  int32_t none[1] = {7};
  add_one_to_first(DataType::Int32, none, 0);
  EXPECT_EQ(none[0], 7);
}

TEST(BandwidthOptions, ContradictionsNameTheFlag) {
  BandwidthOptions o;
  o.min_bytes = 2048;
  o.max_bytes = 1024;
  EXPECT_THROW(validate(o, 2), UsageError);
  o = BandwidthOptions{};
  o.root = 4;
  try {
    validate(o, 4);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-r/--root 4"), std::string::npos);
  }
  o = BandwidthOptions{};
  o.ops = {RedOp::Avg};
  o.types = {DataType::Int32};
  EXPECT_THROW(validate(o, 2), UsageError);
  o = BandwidthOptions{};
  o.pairs = true;
  EXPECT_THROW(validate(o, 1), UsageError);
  o.root = -1;
  EXPECT_NO_THROW(validate(o, 2));
}

}  // namespace
}  // namespace ddx::bw
