#include "reference_run.h"

#include <dirent.h>
#include <sys/wait.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "models/safetensors.h"

namespace ddx::testing {
namespace {

constexpr int kRunTimeoutS = 150;

// Both sides' training dtype (reference_run.h: the precision), and the safetensors dtype their
// final weights then have.
constexpr const char* kDtype = "fp64";
constexpr const char* kWeightsDtype = "F64";

std::vector<nlohmann::json> read_jsonl(const std::string& file) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

}  // namespace

std::string one_global_batch_of_text(int blocks, int seq_length) {
  static const char* words[] = {"the", "mason", "of", "Corul", "built", "a", "bridge", "over", "river",
                                "and", "mill", "turned", "all", "day", "long", "while", "17", "+", "25", "=", "42."};
  const size_t bytes = static_cast<size_t>(blocks) * static_cast<size_t>(seq_length);
  std::string text;
  uint32_t x = 12345;
  while (text.size() < bytes) {
    x = x * 1103515245u + 12345u;
    text += words[(x >> 16) % (sizeof(words) / sizeof(words[0]))];
    text += ' ';
  }
  text.resize(bytes);
  return text + "\n";
}

void ReferenceRunTest::SetUp() {
  dir_ = scratch_dir(suite_, ::testing::UnitTest::GetInstance()->current_test_info()->name());
  data_ = path("data.txt");
  std::ofstream(data_, std::ios::binary) << one_global_batch_of_text(global_batch_, seq_length_);
}

void ReferenceRunTest::TearDown() {
  std::error_code ec;
  if (!HasFailure()) std::filesystem::remove_all(dir_, ec);
}

RunResult ReferenceRunTest::run(const std::string& name, std::vector<std::string> argv) {
  RunResult r;
  pid_t group = -1;
  {
    ChildProcess child(std::move(argv), {{"OMP_NUM_THREADS", "1"}}, path(name + ".log"));
    group = child.pid();
    auto status = child.wait(std::chrono::seconds(kRunTimeoutS));
    r.output = child.output();
    if (!status) {
      r.output += "\n[test] TIMED OUT after " + std::to_string(kRunTimeoutS) + " s";
    } else if (WIFEXITED(*status)) {
      r.exit_code = WEXITSTATUS(*status);
    }
  }  // a timed-out child's process group is killed here
  std::vector<pid_t> left = processes_left(dir_, group);
  EXPECT_TRUE(wait_until_dead(left, std::chrono::seconds(10))) << name << ": processes left behind";
  for (pid_t pid : processes_left(dir_, group)) ::kill(pid, SIGKILL);
  return r;
}

std::vector<std::string> ReferenceRunTest::ddx_train(const std::string& name, std::vector<std::string> extra) const {
  std::vector<std::string> argv = {DDX_BIN, "train", "-m", model_, "-d", data_, "-s", std::to_string(seq_length_),
                                   "--seed", "7", "--save-dir", path("out-" + name), "--metrics-file",
                                   path(name + ".jsonl"), "--log-freq", "1", "--no-progress"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

RunResult ReferenceRunTest::run_ddx(const std::string& name, int ranks, std::vector<std::string> flags) {
  std::vector<std::string> extra = {"--dtype", kDtype, "--lr", "3e-3", "--max-steps", std::to_string(steps_),
                                    "--final-weights", path(name + ".safetensors")};
  extra.insert(extra.end(), flags.begin(), flags.end());
  auto train = ddx_train(name, extra);
  if (ranks == 1) return run(name, train);
  std::vector<std::string> argv = {DDX_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--"};
  argv.insert(argv.end(), train.begin(), train.end());
  return run(name, argv);
}

// At the default --dtype fp32: ddx draws float32 initial values at any dtype.
void ReferenceRunTest::make_initial_weights() {
  auto init = run("init", ddx_train("init", {"-b", std::to_string(global_batch_), "--lr", "0", "--max-steps", "1",
                                             "--final-weights", path("init.safetensors")}));
  ASSERT_EQ(init.exit_code, 0) << init.output;
}

void ReferenceRunTest::run_reference(const std::string& name, const std::string& script,
                                     std::vector<std::string> flags) {
  std::vector<std::string> argv = {DDX_PYTHON, std::string(DDX_SOURCE_DIR) + "/tests/python/" + script,
                                   "--data", data_, "--init", path("init.safetensors"), "--model", model_,
                                   "--seq-length", std::to_string(seq_length_), "--steps", std::to_string(steps_),
                                   "--lr", "3e-3", "--dtype", kDtype, "--out", path(name + ".json"),
                                   "--final-weights", path(name + ".safetensors")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto ref = run(name, argv);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
}

void ReferenceRunTest::expect_matches(const std::string& ours, const std::string& theirs, const std::string& label,
                                      const Tolerances& tol) {
  const std::vector<nlohmann::json> records = read_jsonl(path(ours + ".jsonl"));
  std::ifstream in(path(theirs + ".json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  const auto& losses = reference.at("losses");
  const auto& norms = reference.at("grad_norms");
  ASSERT_EQ(records.size(), static_cast<size_t>(steps_));
  ASSERT_EQ(losses.size(), static_cast<size_t>(steps_));
  double worst = 0, worst_norm = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const double loss = records[i].at("loss").get<double>(), ref = losses[i].get<double>();
    const double rel = std::fabs(loss - ref) / std::fabs(ref);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, tol.loss_rtol) << ours << " step " << i + 1 << ": ddx " << loss << " vs " << label << " " << ref;
    const double g = records[i].at("grad_norm").get<double>(), g_ref = norms[i].get<double>();
    const double g_rel = std::fabs(g - g_ref) / g_ref;
    worst_norm = std::max(worst_norm, g_rel);
    EXPECT_LE(g_rel, tol.grad_norm_rtol)
        << ours << " step " << i + 1 << ": grad norm ddx " << g << " vs " << label << " " << g_ref;
  }
  // Training moved: a comparison of two runs that both did nothing would pass trivially.
  EXPECT_LT(losses.back().get<double>(), (1 - min_loss_drop_) * losses.front().get<double>());
  std::printf("%s: %d steps, worst relative difference to %s: loss %.3g, grad norm %.3g\n", ours.c_str(), steps_,
              label.c_str(), worst, worst_norm);

  auto x_index = models::read_safetensors_index(path(ours + ".safetensors"));
  auto y_index = models::read_safetensors_index(path(theirs + ".safetensors"));
  ASSERT_EQ(x_index.size(), y_index.size());
  double max_diff = 0, scale = 0;
  std::string worst_tensor;
  for (const auto& [tensor, info] : y_index) {
    ASSERT_TRUE(x_index.count(tensor)) << tensor << " missing from ddx's final weights";
    // A side that trained in float32 would fail on rounding alone: say so instead.
    ASSERT_EQ(info.dtype, kWeightsDtype) << label << " did not train in " << kDtype << ": " << tensor;
    ASSERT_EQ(x_index.at(tensor).dtype, kWeightsDtype) << "ddx did not train in " << kDtype << ": " << tensor;
    auto x = models::read_tensor(x_index.at(tensor)), y = models::read_tensor(info);
    ASSERT_EQ(x.sizes(), y.sizes()) << tensor;
    const double diff = (x - y).abs().max().item<double>();
    if (diff > max_diff) {
      max_diff = diff;
      worst_tensor = tensor;
    }
    scale = std::max(scale, y.abs().max().item<double>());
  }
  std::printf("%s: final weights differ from %s by %.3g of the largest weight (%s)\n", ours.c_str(), label.c_str(),
              max_diff / scale, worst_tensor.c_str());
  EXPECT_LE(max_diff, tol.weight_tol_of_scale * scale)
      << ours << ": worst tensor " << worst_tensor << ": " << max_diff << " of max weight " << scale;
}

}  // namespace ddx::testing
