// The --profile accounting (trainers/observe/profile_report.h) on hand-made events: every
// nanosecond of a step lands in exactly one row, layer kinds come from the model's scopes, and
// backward nodes inherit the layer kind of the forward op with their sequence number.
#include "observe/profile_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ddx::train {
namespace {

// Times in ns; one step of 1000 ns with every phase, one empty step of 500 ns.
std::vector<ProfileEvent> two_steps() {
  auto ev = [](const char* name, int64_t start, int64_t end, int64_t seq = -1) {
    return ProfileEvent{name, 1, start, end, seq};
  };
  return {
      ev("ddx::step", 0, 1000),
      ev("ddx::data", 10, 60), ev("aten::copy_", 20, 40),
      ev("ddx::forward", 100, 500),
      ev("ddx::embedding", 100, 150), ev("aten::embedding", 105, 145, 1),
      ev("ddx::block", 150, 400),
      ev("ddx::norm", 150, 200), ev("aten::layer_norm", 155, 195, 2),
      ev("ddx::attention", 200, 300), ev("aten::addmm", 210, 290, 3),
      ev("aten::add", 300, 320, 4),
      ev("ddx::mlp", 320, 400), ev("aten::addmm", 330, 390, 5),
      ev("ddx::head", 400, 450), ev("aten::mm", 405, 445, 6),
      ev("ddx::loss", 450, 500), ev("aten::cross_entropy_loss", 455, 495, 7),
      ev("ddx::backward", 500, 800),
      ev("autograd::engine::evaluate_function: MmBackward0", 510, 560, 6), ev("aten::mm", 515, 550),
      ev("autograd::engine::evaluate_function: AddmmBackward0", 560, 660, 3),
      ev("autograd::engine::evaluate_function: Unknown", 660, 700, 99),
      // A custom function's node: no forward op has its number; it opens its kind's scope.
      ev("autograd::engine::evaluate_function: torch::autograd::CppNode<Tied>", 700, 760, 98),
      ev("ddx::embedding", 705, 755), ev("aten::index_add_", 710, 750),
      ev("ddx::comm_wait", 800, 850),
      ev("ddx::optimizer", 850, 990), ev("aten::lerp_", 860, 960),
      ev("aten::mm", 2000, 2100),  // between steps: not counted
      ev("ddx::step", 3000, 3500),
      ProfileEvent{"aten::mm", 2, 0, 5000, -1},  // another thread, outside any step
  };
}

double row(const ProfileSummary& s, const std::string& name) {
  for (const auto& r : s.phases) {
    if (r.phase == name) return r.ms;
  }
  ADD_FAILURE() << "no row " << name;
  return -1;
}

// ns over 2 steps -> ms per step
constexpr double per_step(double ns) { return ns / 2 * 1e-6; }

TEST(ProfileReport, EveryNanosecondOfAStepLandsInOneRow) {
  const ProfileSummary s = summarize_profile(two_steps());
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.step_ms, per_step(1500));
  double sum = 0;
  for (const auto& r : s.phases) sum += r.ms;
  EXPECT_NEAR(sum, s.step_ms, 1e-12);
  EXPECT_DOUBLE_EQ(row(s, "data"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "forward.embedding"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "forward.norm"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "forward.attention"), per_step(100));
  EXPECT_DOUBLE_EQ(row(s, "forward.residual"), per_step(20));
  EXPECT_DOUBLE_EQ(row(s, "forward.mlp"), per_step(80));
  EXPECT_DOUBLE_EQ(row(s, "forward.head"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "forward.other"), 0);
  EXPECT_DOUBLE_EQ(row(s, "loss"), per_step(50));
  // Backward nodes take the layer kind of the forward op with their sequence number, or of
  // the scope they open (a custom function's); the unknown node, the custom node's own time
  // and the scope's own time are "other".
  EXPECT_DOUBLE_EQ(row(s, "backward.head"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "backward.attention"), per_step(100));
  EXPECT_DOUBLE_EQ(row(s, "backward.embedding"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "backward.other"), per_step(40 + 10 + 50));
  EXPECT_DOUBLE_EQ(row(s, "comm_wait"), per_step(50));
  EXPECT_DOUBLE_EQ(row(s, "optimizer"), per_step(140));
  EXPECT_DOUBLE_EQ(row(s, "other"), per_step(60 + 500));
  EXPECT_DOUBLE_EQ(phase_ms(s, "forward"), per_step(350));
  EXPECT_DOUBLE_EQ(phase_ms(s, "backward"), per_step(300));
}

TEST(ProfileReport, OpsBySelfTimeWithTheirMainPhase) {
  const ProfileSummary s = summarize_profile(two_steps());
  ASSERT_FALSE(s.ops.empty());
  EXPECT_EQ(s.ops[0].name, "aten::addmm");
  EXPECT_DOUBLE_EQ(s.ops[0].calls, 1.0);
  EXPECT_DOUBLE_EQ(s.ops[0].self_ms, per_step(80 + 60));
  EXPECT_EQ(s.ops[0].phase, "forward.attention");
  for (const auto& op : s.ops) {
    EXPECT_NE(op.name.rfind("ddx::", 0), 0u) << "scopes are phases, not ops";
    if (op.name == "aten::mm") {
      EXPECT_DOUBLE_EQ(op.calls, 1.0) << "the calls outside steps are not counted";
      EXPECT_DOUBLE_EQ(op.self_ms, per_step(40 + 35));
      EXPECT_EQ(op.phase, "forward.head");
    }
  }
}

TEST(ProfileReport, TableAndJsonCarryTheSameNumbers) {
  const ProfileSummary s = summarize_profile(two_steps());
  const std::string table = profile_table(s, "title", 3);
  EXPECT_EQ(table.rfind("title\n", 0), 0u);
  for (const char* label : {"data", "forward", "  attention", "loss", "backward", "gradient comm wait", "optimizer",
                            "step (wall)", "aten::addmm"}) {
    EXPECT_NE(table.find(label), std::string::npos) << label << "\n" << table;
  }
  const auto j = nlohmann::json::parse(profile_json(s));
  EXPECT_EQ(j.at("steps").get<int>(), 2);
  EXPECT_DOUBLE_EQ(j.at("step_ms").get<double>(), s.step_ms);
  EXPECT_EQ(j.at("phases").size(), s.phases.size());
  EXPECT_EQ(j.at("ops").at(0).at("op").get<std::string>(), "aten::addmm");
}

TEST(ProfileReport, NoStepSaysSo) {
  const ProfileSummary s = summarize_profile({{"aten::mm", 1, 0, 10, -1}});
  EXPECT_EQ(s.steps, 0);
  EXPECT_NE(profile_table(s, "t", 5).find("no step was profiled"), std::string::npos);
}

}  // namespace
}  // namespace ddx::train
