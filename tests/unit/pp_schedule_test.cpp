// Pipeline schedules, stage splits and the schedule picture, without LibTorch or processes:
// every schedule simulated on every rank (blocking receives, non-blocking sends) must finish,
// run each (micro-batch, stage) forward and backward once, and hold the activations its
// schedule promises; a schedule that deadlocks or repeats a micro-batch must be named.
#include <gtest/gtest.h>

#include <algorithm>

#include "ddx/errors/errors.h"
#include "strategies/pp/pp_schedule.h"
#include "strategies/pp/pp_stages.h"
#include "strategies/pp/pp_trace.h"

namespace ddx::train {
namespace {

PipeShape shape(int p, int v, int m) {
  PipeShape s;
  s.ranks = p;
  s.virtual_stages = v;
  s.microbatches = m;
  return s;
}

TEST(PipeSchedule, GpipeAndOneFOneBFinishOnEveryRankWithTheirActivationBounds) {
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 8; ++m) {
      const ScheduleCheck gpipe = check_schedules(find_schedule("gpipe"), shape(p, 1, m));
      ASSERT_TRUE(gpipe.ok) << "gpipe p=" << p << " m=" << m << ": " << gpipe.problem;
      const ScheduleCheck f1b1 = check_schedules(find_schedule("1f1b"), shape(p, 1, m));
      ASSERT_TRUE(f1b1.ok) << "1f1b p=" << p << " m=" << m << ": " << f1b1.problem;
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(gpipe.max_in_flight[r], m) << "gpipe holds every micro-batch";
        // 1F1B: rank r holds at most p - r micro-batches (never more than m).
        EXPECT_EQ(f1b1.max_in_flight[r], std::min(p - r, m)) << "1f1b p=" << p << " m=" << m << " rank " << r;
      }
    }
  }
}

// Megatron's interleaved 1F1B: rank r runs (p - r - 1) * 2 + (V - 1) * p warm-up forwards (all
// m V when fewer), so it holds one more than that at most; and it walks micro-batches in groups
// of p, chunk by chunk: forwards 0..p-1 are chunk 0 of micro-batches 0..p-1, the next p chunk 1.
int interleaved_in_flight(int p, int v, int m, int r) { return std::min((p - r - 1) * 2 + (v - 1) * p + 1, m * v); }

TEST(PipeSchedule, InterleavedFinishesForEveryFittingShapeWithMegatronsWarmupAndOrder) {
  for (int p = 1; p <= 4; ++p) {
    for (int v = 1; v <= 3; ++v) {
      for (int m = p; m <= 4 * p; m += p) {
        const ScheduleCheck c = check_schedules(find_schedule("interleaved-1f1b"), shape(p, v, m));
        ASSERT_TRUE(c.ok) << "p=" << p << " V=" << v << " m=" << m << ": " << c.problem;
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(c.max_in_flight[r], interleaved_in_flight(p, v, m, r)) << "p=" << p << " V=" << v << " m=" << m
                                                                          << " rank " << r;
          PipeShape on_rank = shape(p, v, m);
          on_rank.rank = r;
          int forwards = 0;
          for (const PipeAction& a : interleaved_1f1b_schedule(on_rank)) {
            if (a.kind != PipeAction::Kind::Forward) continue;
            const int group = forwards / (p * v), in_group = forwards % (p * v);
            EXPECT_EQ(a.microbatch, group * p + in_group % p) << "forward " << forwards << " p=" << p << " V=" << v;
            EXPECT_EQ(a.chunk, in_group / p) << "forward " << forwards << " p=" << p << " V=" << v;
            ++forwards;
          }
          EXPECT_EQ(forwards, m * v);
        }
      }
    }
  }
}

// The check above fails an "interleaved" schedule that runs in GPipe's order (every forward,
// then every backward): its ranks hold all m V micro-batch chunks.
PipeSchedule interleaved_in_gpipe_order(const PipeShape& s) {
  PipeSchedule forwards, backwards;
  for (const PipeAction& a : interleaved_1f1b_schedule(s)) (a.kind == PipeAction::Kind::Forward ? forwards : backwards).push_back(a);
  forwards.insert(forwards.end(), backwards.begin(), backwards.end());
  return forwards;
}

TEST(PipeSchedule, AnInterleavedScheduleInGpipeOrderIsToldApart) {
  const ScheduleKind gpipe_order{"interleaved-gpipe-order", "", interleaved_in_gpipe_order, true, interleaved_bubble};
  const ScheduleCheck c = check_schedules(gpipe_order, shape(4, 2, 8));
  ASSERT_TRUE(c.ok) << c.problem;  // it runs...
  EXPECT_EQ(c.max_in_flight[0], 16);
  // ...but every rank holds all m V = 16 chunks, where the real schedule holds Megatron's
  // warm-up plus one: 11, 9, 7 and 5 (the bound the test above holds it to).
  EXPECT_EQ(c.max_in_flight, (std::vector<int>{16, 16, 16, 16}));
  const ScheduleCheck real = check_schedules(find_schedule("interleaved-1f1b"), shape(4, 2, 8));
  ASSERT_TRUE(real.ok) << real.problem;
  EXPECT_EQ(real.max_in_flight, (std::vector<int>{11, 9, 7, 5}));
}

// A rank that starts with a backward waits for a gradient no one sends until it has sent
// the activation no one receives: the check must name the stuck ranks and actions.
PipeSchedule backward_first(const PipeShape& s) {
  PipeSchedule out;
  for (int mb = 0; mb < s.microbatches; ++mb) out.push_back({PipeAction::Kind::Backward, mb, 0});
  for (int mb = 0; mb < s.microbatches; ++mb) out.push_back({PipeAction::Kind::Forward, mb, 0});
  return out;
}

// The planted schedule bug of the parity self-test, in schedule form: micro-batch 0's
// backward runs twice.
PipeSchedule twice(const PipeShape& s) {
  PipeSchedule out = one_f_one_b_schedule(s);
  out.push_back({PipeAction::Kind::Backward, 0, 0});
  return out;
}

TEST(PipeSchedule, DeadlockAndRepeatedMicrobatchAreNamed) {
  const ScheduleKind stuck{"backward-first", "", backward_first, false, flush_bubble};
  const ScheduleCheck c = check_schedules(stuck, shape(2, 1, 2));
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.problem, "deadlock: rank 0 waits in the backward of micro-batch 0 at stage 0; "
                       "rank 1 waits in the backward of micro-batch 0 at stage 1");
  const ScheduleKind repeated{"twice", "", twice, false, flush_bubble};
  const ScheduleCheck d = check_schedules(repeated, shape(2, 1, 3));
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.problem.find("runs the backward of micro-batch 0 at stage"), std::string::npos) << d.problem;
}

TEST(PipeSchedule, TheoreticalBubbles) {
  EXPECT_DOUBLE_EQ(flush_bubble(shape(4, 1, 8)), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(interleaved_bubble(shape(4, 2, 8)), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(flush_bubble(shape(1, 1, 4)), 0.0);
}

TEST(PipeSchedule, UnknownScheduleListsTheKnownOnes) {
  try {
    find_schedule("zero-bubble");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--pp-schedule zero-bubble is not one of: gpipe, 1f1b, interleaved-1f1b");
  }
}

TEST(StageSplit, BalancedByParameterCountWithEmbeddingAndHead) {
  const std::vector<int64_t> blocks(8, 10);
  EXPECT_EQ(balanced_split(blocks, 25, 25, 2).first_block, (std::vector<int64_t>{0, 4, 8}));
  // A heavy embedding leaves the first stage fewer blocks.
  EXPECT_EQ(balanced_split(blocks, 40, 0, 2).first_block, (std::vector<int64_t>{0, 2, 8}));
  // One block per stage when stages = blocks.
  EXPECT_EQ(balanced_split(blocks, 1000, 1000, 8).first_block, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(balanced_split({10, 10, 10}, 5, 5, 3).describe(), "0 | 1 | 2");
  EXPECT_EQ(balanced_split(blocks, 0, 0, 2).describe(), "0-3 | 4-7");
}

TEST(StageSplit, ManualCutsAreChecked) {
  EXPECT_EQ(manual_split({2, 5}, 8, 3).first_block, (std::vector<int64_t>{0, 2, 5, 8}));
  auto message = [](const std::vector<int64_t>& cuts, int stages) {
    try {
      manual_split(cuts, 8, stages);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({2}, 3), "--pp-split 2 has 1 cut(s); 3 stages need 2");
  EXPECT_EQ(message({5, 2}, 3),
            "--pp-split 5,2: every cut must be a block index above the previous one and below 8 (so that no stage is empty)");
  EXPECT_EQ(message({0}, 2),
            "--pp-split 0: every cut must be a block index above the previous one and below 8 (so that no stage is empty)");
  EXPECT_EQ(message({8}, 2),
            "--pp-split 8: every cut must be a block index above the previous one and below 8 (so that no stage is empty)");
}

TEST(PipeTrace, DrawsEveryComputeEventAndBothBubbles) {
  std::vector<std::vector<PipeEvent>> events(2);
  events[0] = {{PipeEvent::Kind::Forward, 0, 0, 0.0, 0.1}, {PipeEvent::Kind::Send, 0, 1, 0.1, 0.1},
               {PipeEvent::Kind::Recv, 0, 1, 0.1, 0.3}, {PipeEvent::Kind::Backward, 0, 0, 0.3, 0.5}};
  events[1] = {{PipeEvent::Kind::Recv, 0, 0, 0.0, 0.1}, {PipeEvent::Kind::Forward, 0, 1, 0.1, 0.2},
               {PipeEvent::Kind::Backward, 0, 1, 0.2, 0.3}};
  PipeTraceInfo info;
  info.schedule = "1f1b";
  info.ranks = 2;
  info.steps = 1;
  info.bubble_measured = 0.4;
  info.bubble_theoretical = 0.5;
  const std::string svg = render_pipeline_trace(events, info);
  EXPECT_NE(svg.find("bubble measured 40.0%, theoretical 50.0%"), std::string::npos);
  size_t titles = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) ++titles;
  EXPECT_EQ(titles, 4u);  // two forwards, two backwards
  EXPECT_NE(svg.find("forward micro-batch 0, stage 1"), std::string::npos);
  EXPECT_NE(svg.find("backward micro-batch 0, stage 0"), std::string::npos);
}

}  // namespace
}  // namespace ddx::train
