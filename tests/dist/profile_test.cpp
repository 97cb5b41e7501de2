// `ddx train --profile` on the debug models: the Chrome trace is valid JSON holding the loop's
// phases, the models' layer kinds and LibTorch's ops; the table's rows add up to the step's
// wall time; under DDP every rank writes its own; bad targets are one-line usage errors.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <set>

#include "train_fixture.h"

namespace ddx::testing {
namespace {

using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::set<std::string> trace_names(const fs::path& path) {
  std::set<std::string> names;
  const json trace = read_json(path);  // named: a range-for over a temporary's member would dangle
  for (const auto& e : trace.at("traceEvents")) {
    if (e.contains("name") && e.at("name").is_string()) names.insert(e.at("name").get<std::string>());
  }
  return names;
}

double row(const json& summary, const std::string& phase) {
  double ms = 0;
  for (const auto& r : summary.at("phases")) {
    const auto name = r.at("phase").get<std::string>();
    if (name == phase || name.rfind(phase + ".", 0) == 0) ms += r.at("ms").get<double>();
  }
  return ms;
}

// The rows partition the profiled steps: they add up to the step time, and the phases the
// model and the loop record are all there.
void expect_table_adds_up(const json& s, int64_t steps, const std::vector<std::string>& kinds) {
  EXPECT_EQ(s.at("steps").get<int64_t>(), steps);
  const double step_ms = s.at("step_ms").get<double>();
  ASSERT_GT(step_ms, 0);
  double sum = 0;
  for (const auto& r : s.at("phases")) {
    EXPECT_GE(r.at("ms").get<double>(), 0) << r;
    sum += r.at("ms").get<double>();
  }
  EXPECT_NEAR(sum, step_ms, 1e-6 * step_ms);
  for (const std::string& kind : kinds) EXPECT_GT(row(s, "forward." + kind), 0) << kind;
  for (const char* phase : {"data", "loss", "backward", "optimizer"}) EXPECT_GT(row(s, phase), 0) << phase;
  // Most of a step is in the named phases, not the loop around them (under DDP the tiny debug
  // model mostly waits for gradients: comm wait counts).
  EXPECT_LT(row(s, "other"), 0.5 * step_ms) << s;
  // Backward nodes find the layer kind of the forward op that made them.
  EXPECT_GT(row(s, "backward.attention"), 0);
  EXPECT_GT(row(s, "backward.mlp"), 0);
  std::set<std::string> ops;
  for (const auto& op : s.at("ops")) ops.insert(op.at("op").get<std::string>());
  EXPECT_TRUE(ops.count("aten::addmm") || ops.count("aten::mm")) << s.at("ops");
}

TEST_F(TrainTest, ProfileWritesATraceAndATableThatAddsUp) {
  for (const std::string model : {"debug", "debug-llama"}) {
    const fs::path dir = dir_ / ("profile-" + model);
    auto r = train(0, model, {"-m", model, "--max-steps", "4", "--profile", dir.string(), "--profile-steps", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("step (wall)"), std::string::npos) << "the table is printed\n" << r.output;
    const auto names = trace_names(dir / "trace.json");
    for (const char* scope : {"ddx::step", "ddx::data", "ddx::forward", "ddx::embedding", "ddx::attention", "ddx::mlp",
                              "ddx::norm", "ddx::head", "ddx::loss", "ddx::backward", "ddx::optimizer"}) {
      EXPECT_TRUE(names.count(scope)) << model << ": " << scope << " not in the trace";
    }
    expect_table_adds_up(read_json(dir / "profile.json"), 2, {"embedding", "attention", "mlp", "norm", "residual", "head"});
    std::ifstream table(dir / "profile.txt");
    EXPECT_TRUE(table.good());
  }
}

TEST_F(TrainTest, ProfileUnderDdpWritesOnePerRankWithTheCommWait) {
  const fs::path trace = dir_ / "ddp.json";
  auto r = train(2, "ddp", {"--strategy", "ddp", "-b", "2", "--max-steps", "3", "--profile", trace.string(),
                            "--profile-steps", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank : {0, 1}) {
    const std::string stem = (dir_ / ("ddp.rank" + std::to_string(rank))).string();
    EXPECT_TRUE(trace_names(stem + ".json").count("ddx::comm_wait")) << rank;
    const json s = read_json(stem + ".summary.json");
    expect_table_adds_up(s, 2, {"embedding", "attention", "mlp", "norm", "head"});
    EXPECT_TRUE(fs::exists(stem + ".txt"));
  }
}

TEST_F(TrainTest, BadProfileTargetIsAOneLineUsageError) {
  const fs::path file = dir_ / "notes.txt";
  std::ofstream(file) << "not a folder";
  fs::create_directories(dir_ / "folder.json");
  const std::vector<std::string> targets = {"", file.string(), (dir_ / "folder.json").string(), (file / "sub").string()};
  for (const std::string& target : targets) {
    auto r = train(0, "bad", {"--max-steps", "1", "--profile", target});
    EXPECT_EQ(r.exit_code, 2) << target << "\n" << r.output;
    EXPECT_NE(r.output.find("ddx: error: --profile"), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "not a folder") << "the file is left as it was";
  auto steps = train(0, "bad", {"--max-steps", "1", "--profile", (dir_ / "p").string(), "--profile-steps", "0"});
  EXPECT_EQ(steps.exit_code, 2) << steps.output;
}

}  // namespace
}  // namespace ddx::testing
