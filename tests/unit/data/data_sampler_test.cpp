// BlockSampler: seeded per-epoch shuffles, drop_last, O(1) resume, and rank slices that make
// the global batch of every step independent of the world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "data/dataset.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

TEST(Sampler, SameSeedSameOrderAndPinnedValues) {
  BlockSampler a(10, 4, 0), b(10, 4, 0);
  EXPECT_EQ(a.steps_per_epoch(), 2);  // 10 / 4, the last 2 blocks dropped
  for (int64_t e = 0; e < 3; ++e) {
    for (int64_t s = 0; s < 2; ++s) EXPECT_EQ(a.global_batch(e, s), b.global_batch(e, s));
  }
  // Pinned so a change of PRNG or shuffle (or a platform difference) cannot go unnoticed:
  // it would silently change every run's data order.
  EXPECT_EQ(a.global_batch(0, 0), (std::vector<int64_t>{9, 8, 2, 3}));
  EXPECT_EQ(a.global_batch(0, 1), (std::vector<int64_t>{5, 4, 7, 0}));
  EXPECT_EQ(a.global_batch(1, 0), (std::vector<int64_t>{2, 8, 9, 1}));
}

TEST(Sampler, EachEpochIsAPermutationAndEpochsAndSeedsDiffer) {
  const int64_t n = 1000, batch = 8;
  BlockSampler s(n, batch, 42), other_seed(n, batch, 43);
  std::vector<std::vector<int64_t>> orders;
  for (int64_t e = 0; e < 4; ++e) {
    std::vector<int64_t> order;
    for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
      auto b = s.global_batch(e, k);
      order.insert(order.end(), b.begin(), b.end());
    }
    ASSERT_EQ(order.size(), static_cast<size_t>(n));  // 1000 / 8 steps, nothing dropped
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), static_cast<size_t>(n));
    orders.push_back(order);
  }
  for (size_t i = 0; i < orders.size(); ++i) {
    for (size_t j = i + 1; j < orders.size(); ++j) EXPECT_NE(orders[i], orders[j]) << "epochs " << i << ", " << j;
  }
  EXPECT_NE(other_seed.global_batch(0, 0), s.global_batch(0, 0));
}

TEST(Sampler, DropLastLeavesNoDuplicatesAndSkipsTheRemainder) {
  BlockSampler s(103, 10, 7);
  ASSERT_EQ(s.steps_per_epoch(), 10);
  std::set<int64_t> seen;
  for (int64_t k = 0; k < 10; ++k) {
    for (int64_t b : s.global_batch(0, k)) {
      EXPECT_TRUE(seen.insert(b).second);
      EXPECT_GE(b, 0);
      EXPECT_LT(b, 103);
    }
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_THROW(s.global_batch(0, 10), std::out_of_range);
}

TEST(Sampler, ResumeAtAnyStepEqualsContinuing) {
  BlockSampler running(500, 16, 3);
  std::vector<std::vector<int64_t>> straight;
  for (int64_t g = 0; g < 3 * running.steps_per_epoch(); ++g) {
    auto [e, k] = running.locate(g);
    straight.push_back(running.global_batch(e, k));
  }
  for (int64_t resume_at : {int64_t{0}, int64_t{1}, int64_t{30}, int64_t{31}, int64_t{32}, int64_t{77}}) {
    BlockSampler fresh(500, 16, 3);  // a restarted process: no history
    for (int64_t g = resume_at; g < static_cast<int64_t>(straight.size()); ++g) {
      auto [e, k] = fresh.locate(g);
      ASSERT_EQ(fresh.global_batch(e, k), straight[g]) << "resume at " << resume_at << ", step " << g;
    }
  }
  EXPECT_EQ(running.locate(31), (std::pair<int64_t, int64_t>{1, 0}));  // 500 / 16 = 31 steps per epoch
}

TEST(Sampler, RankSlicesConcatenateToTheSameGlobalBatchForAnyWorldSize) {
  const int64_t batch = 8;
  BlockSampler s(333, batch, 11);
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
      const auto global = s.global_batch(e, k);
      for (int world : {1, 2, 4}) {
        std::vector<int64_t> joined;
        for (int r = 0; r < world; ++r) {
          auto part = s.rank_batch(e, k, r, world);
          EXPECT_EQ(part.size(), static_cast<size_t>(batch / world));
          joined.insert(joined.end(), part.begin(), part.end());
        }
        ASSERT_EQ(joined, global) << "world " << world << " epoch " << e << " step " << k;
      }
    }
  }
  // The global batch itself does not depend on who asks: separate samplers per "rank".
  BlockSampler rank3_of_4(333, batch, 11);
  EXPECT_EQ(rank3_of_4.rank_batch(1, 5, 3, 4), s.rank_batch(1, 5, 3, 4));
}

TEST(Sampler, RefusesImpossibleLayouts) {
  EXPECT_THROW(BlockSampler(3, 4, 0), UsageError);  // fewer blocks than one batch
  EXPECT_THROW(BlockSampler(10, 0, 0), UsageError);
  BlockSampler s(12, 6, 0);
  EXPECT_THROW(s.rank_batch(0, 0, 0, 4), UsageError);  // 6 % 4 != 0
  EXPECT_THROW(s.rank_batch(0, 0, 2, 2), UsageError);  // rank out of range
  EXPECT_THROW(s.global_batch(-1, 0), std::out_of_range);
}

// Loose uniformity check: over many epochs every block lands in the first batch about
// equally often (a broken shuffle, e.g. an off-by-one in Fisher-Yates, fails this).
TEST(Sampler, ShuffleIsRoughlyUniform) {
  const int64_t n = 20;
  BlockSampler s(n, 1, 5);
  std::vector<int> first(n, 0);
  const int epochs = 20000;
  for (int e = 0; e < epochs; ++e) ++first[s.global_batch(e, 0)[0]];
  double chi2 = 0;
  const double expected = static_cast<double>(epochs) / n;
  for (int c : first) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 50.0);  // 19 degrees of freedom: p < 1e-4 beyond ~45
}

TEST(Sampler, CopiesAndThreadsAgree) {
  BlockSampler s(1000, 10, 9);
  BlockSampler copy = s;
  std::vector<std::vector<int64_t>> a(8), b(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t e = 0; e < 5; ++e) {
        auto x = (t % 2 ? copy : s).global_batch((e + t) % 5, t);
        a[t].insert(a[t].end(), x.begin(), x.end());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    BlockSampler fresh(1000, 10, 9);
    for (int64_t e = 0; e < 5; ++e) {
      auto x = fresh.global_batch((e + t) % 5, t);
      b[t].insert(b[t].end(), x.begin(), x.end());
    }
    EXPECT_EQ(a[t], b[t]);
  }
}

}  // namespace
}  // namespace ddx::data
