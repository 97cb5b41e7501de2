// The outlier rule (ddx/outliers.h) and the per-rank probe verdict (probes/node/rank_judge.h) on
// planted figures: the one slow rank or host is named with its figures, healthy spreads are not.
#include <gtest/gtest.h>

#include "ddx/outliers.h"
#include "node/rank_judge.h"

namespace ddx {
namespace {

TEST(Outliers, MedianAndMad) {
  EXPECT_EQ(median({3, 1, 2, 10}), 2.5);
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median_absolute_deviation({1, 2, 3, 4, 100}), 1);
}

TEST(Outliers, TheSlowOneIsNamedAgainstItsPeersNotItself) {
  OutlierRule rule;
  rule.margin = 0.2;
  const auto found = low_outliers({10, 10.2, 9.9, 4, 10.1}, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].index, 3u);
  EXPECT_DOUBLE_EQ(found[0].peer_median, 10.05);
  EXPECT_NEAR(found[0].threshold, 8.04, 1e-9);
}

TEST(Outliers, TwoEntriesTheSlowerIsNamedOnlyPastTheMargin) {
  OutlierRule rule;
  rule.margin = 0.25;
  EXPECT_TRUE(low_outliers({1.0, 0.8}, rule).empty());
  const auto found = low_outliers({1.0, 0.5}, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].index, 1u);
}

TEST(Outliers, AWideSpreadAmongPeersRaisesTheBar) {
  // Peers scatter by +-30 %: 25 % below their median is within their own noise.
  OutlierRule rule;
  rule.margin = 0.10;
  EXPECT_TRUE(low_outliers({7, 13, 10, 7.5, 12.5}, rule).empty());
}

TEST(Outliers, HalfTheRanksSlowAreStillNamed) {
  // A slow host holding half the ranks: each slow rank's peers are mostly the healthy ones.
  OutlierRule rule;
  const auto found = low_outliers({10, 10, 2, 2}, rule);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].index, 2u);
  EXPECT_EQ(found[1].index, 3u);
}

TEST(Outliers, FasterRanksAreNeverNamed) { EXPECT_TRUE(low_outliers({1, 1, 1, 5}, OutlierRule{}).empty()); }

node::RankSamples rank(int r, int local, const std::string& host, std::vector<double> trials) {
  node::RankSamples s;
  s.rank = r;
  s.local_rank = local;
  s.host = host;
  s.trials["fp32_n512"] = std::move(trials);
  return s;
}

const std::vector<node::Metric> kMetrics = {{"fp32_n512", "fp32 n=512", "TFLOP/s"}};

TEST(RankJudge, TheBestTrialIgnoresUnluckyOnes) {
  // Another process on the host slowed three of rank 1's five trials: its best is its speed.
  const std::vector<node::RankSamples> ranks = {rank(0, 0, "a", {1.0, 1.0, 1.02, 0.98, 1.0}),
                                                rank(1, 1, "a", {0.5, 0.2, 1.01, 0.99, 0.4})};
  OutlierRule rule;
  rule.margin = 0.25;
  const node::Verdict v = node::judge(kMetrics, ranks, rule);
  EXPECT_TRUE(v.passed());
  EXPECT_TRUE(v.inconclusive.empty());
}

TEST(RankJudge, ASlowRankIsNamedWithHostAndLocalRank) {
  const std::vector<node::RankSamples> ranks = {rank(0, 0, "a", {1, 1, 1}), rank(1, 1, "a", {1, 1, 1}),
                                                rank(2, 0, "b", {1, 1, 1}), rank(3, 1, "b", {0.3, 0.3, 0.3})};
  OutlierRule rule;
  rule.margin = 0.25;
  const node::Verdict v = node::judge(kMetrics, ranks, rule);
  ASSERT_EQ(v.ranks.size(), 1u);
  EXPECT_EQ(v.ranks[0].rank, 3);
  EXPECT_EQ(v.ranks[0].host, "b");
  EXPECT_EQ(v.ranks[0].local_rank, 1);
  EXPECT_TRUE(v.hosts.empty());  // host b's best rank is as fast as host a's: a rank's problem
  const std::string text = node::format_report("compute", kMetrics, ranks, v, rule);
  EXPECT_NE(text.find("SLOW rank 3 (host b, local rank 1): fp32 n=512 0.3 TFLOP/s, peers' median 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("compute: 4 ranks x 1 metric, 3 trials: SLOW: rank 3 (b, local rank 1): fp32 n=512 0.3 TFLOP/s, "
                      "peers' median 1 (margin 25%)"),
            std::string::npos)
      << text;
}

TEST(RankJudge, ASlowHostIsNamedAsAHost) {
  const std::vector<node::RankSamples> ranks = {rank(0, 0, "a", {1, 1, 1}), rank(1, 1, "a", {1, 1, 1}),
                                                rank(2, 0, "b", {0.4, 0.4, 0.4}), rank(3, 1, "b", {0.4, 0.4, 0.4})};
  const node::Verdict v = node::judge(kMetrics, ranks, OutlierRule{});
  ASSERT_EQ(v.hosts.size(), 1u);
  EXPECT_EQ(v.hosts[0].host, "b");
  EXPECT_EQ(v.hosts[0].ranks, (std::vector<int>{2, 3}));
  const auto j = node::to_json("compute", kMetrics, ranks, v, OutlierRule{});
  EXPECT_FALSE(j["passed"].get<bool>());
  EXPECT_EQ(j["slow_hosts"][0]["host"], "b");
  EXPECT_EQ(j["per_host"][1]["metrics"]["fp32_n512"]["sum"].get<double>(), 0.8);
  const std::string text = node::format_report("compute", kMetrics, ranks, v, OutlierRule{});
  EXPECT_NE(text.find("SLOW HOST b (ranks 2,3)"), std::string::npos) << text;
  EXPECT_NE(text.find("SLOW: host b (ranks 2,3): fp32 n=512 0.4 TFLOP/s on its best rank, other hosts' median 1; "
                      "rank 2 (b, local rank 0): "),
            std::string::npos)
      << text;
}

TEST(RankJudge, TooFewTrialsOrOneRankJudgeNobody) {
  const node::Verdict few = node::judge(kMetrics, {rank(0, 0, "a", {1, 1}), rank(1, 1, "a", {0.1, 0.1})}, OutlierRule{});
  EXPECT_TRUE(few.passed());
  EXPECT_NE(few.inconclusive.find("2 trial(s)"), std::string::npos);
  const node::Verdict one = node::judge(kMetrics, {rank(0, 0, "a", {1, 1, 1})}, OutlierRule{});
  EXPECT_NE(one.inconclusive.find("one rank"), std::string::npos);
}

}  // namespace
}  // namespace ddx
