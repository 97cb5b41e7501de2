// `ddx train --strategy fsdp` end to end with real processes (Gloo over loopback): the loss
// curve of the single-device run at 2 and 4 ranks with every schedule option, agreement with
// DDP, sharded checkpoints (resume at the same and another world size, consolidation), loading
// pretrained weights by byte range, memory accounting, and bad input. The debug model's
// dimensions (vocab 259, hidden 35, MLP 137) divide by neither 2 nor 4: every parameter is
// padded, and at 4 ranks the 5-head biases leave a rank with an empty shard.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddx/checksum.h"
#include "train_fixture.h"

namespace ddx::testing {
namespace {

// Single-device baseline with the global batch of 8 sequences every run here uses.
class FsdpTest : public TrainTest {
 protected:
  void baseline() {
    auto r = train(0, "single", {"-b", "8", "--max-steps", "20", "--final-weights", weights("single")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  RunResult fsdp(int ranks, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--strategy", "fsdp", "-b", std::to_string(8 / ranks), "--max-steps", "20",
                                      "--final-weights", weights(name)};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return train(ranks, name, flags);
  }
};

TEST_F(FsdpTest, MatchesSingleDeviceAtTwoAndFourRanksWithEveryScheduleOption) {
  baseline();
  struct Case {
    int ranks;
    const char* name;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {2, "zero3", {}},
      {4, "zero3_x4", {}},
      {2, "zero2_prefetch2", {"--no-reshard-after-forward", "--prefetch", "2"}},
      {4, "recompute_noprefetch_x4", {"--checkpoint-activations", "--prefetch", "0"}},
      {2, "offload_recompute", {"--cpu-offload", "--checkpoint-activations"}},
  };
  for (const Case& c : cases) {
    auto r = fsdp(c.ranks, c.name, c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    expect_same_run("single", c.name, 1e-5);
  }
  // The schedule really ran: every unit gathered in forward, blocks again in backward.
  auto last = records("zero3").back();
  EXPECT_EQ(last.at("fsdp_units").get<double>(), 6);  // root (tied wte), embeddings (wpe), 3 blocks, head
  EXPECT_EQ(last.at("fsdp_all_gathers").get<double>(), 6 + 4);
  EXPECT_GT(last.at("fsdp_prefetched").get<double>(), 0);
  EXPECT_EQ(last.at("fsdp_reduce_scatters").get<double>(), 6);
  EXPECT_EQ(records("zero2_prefetch2").back().at("fsdp_all_gathers").get<double>(), 6);  // nothing freed in between
}

TEST_F(FsdpTest, AgreesWithDdpAndAccumulatesWithoutCommunication) {
  auto ddp = train(2, "ddp", {"--strategy", "ddp", "-b", "4", "--max-steps", "20", "--final-weights", weights("ddp")});
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto f = fsdp(2, "fsdp", {});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  expect_same_run("ddp", "fsdp", 1e-6);
  // Two micro-steps of 2 sequences per rank: one reduce-scatter per unit per step, not two.
  baseline();
  auto accum = train(2, "accum", {"--strategy", "fsdp", "-b", "2", "--grad-accum", "2", "--max-steps", "20",
                                  "--final-weights", weights("accum")});
  ASSERT_EQ(accum.exit_code, 0) << accum.output;
  expect_same_run("single", "accum", 1e-5);
  EXPECT_EQ(records("accum").back().at("fsdp_reduce_scatters").get<double>(), 6);
}

// bf16 gathered weights and compute with fp32 master shards: the curve follows fp32 within
// bf16's precision, and the gathered units take half the bytes.
TEST_F(FsdpTest, MixedPrecisionTracksFp32) {
  baseline();
  auto fp32 = fsdp(2, "fp32", {});
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  for (const char* reduce : {"fp32", "bf16"}) {
    const std::string name = std::string("bf16_reduce_") + reduce;
    auto r = fsdp(2, name, {"--mp-param-dtype", "bf16", "--mp-reduce-dtype", reduce});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto a = losses("single"), b = losses(name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(std::fabs(a[i] - b[i]) / a[i], 3e-3) << name << " step " << i + 1;
    EXPECT_LT(records(name).back().at("unsharded_peak_bytes").get<double>(),
              0.75 * records("fp32").back().at("unsharded_peak_bytes").get<double>()) << name;
  }
}

TEST_F(FsdpTest, UntiedLlamaMatchesSingleDevice) {
  auto single = train(0, "llama", {"-m", "debug-llama", "-b", "8", "--max-steps", "20", "--final-weights", weights("llama")});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto f = fsdp(4, "llama_x4", {"-m", "debug-llama", "--checkpoint-activations"});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  expect_same_run("llama", "llama_x4", 1e-5);
  EXPECT_EQ(records("llama_x4").back().at("fsdp_units").get<double>(), 5);  // no root: nothing is tied
}

TEST_F(FsdpTest, MemoryIsShardedAcrossRanks) {
  baseline();
  auto two = fsdp(2, "m2", {});
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto four = fsdp(4, "m4", {});
  ASSERT_EQ(four.exit_code, 0) << four.output;
  auto bytes = [&](const std::string& run, const char* key) { return records(run).back().at(key).get<double>(); };
  for (const char* key : {"param_bytes", "grad_bytes", "optimizer_bytes"}) {
    const double single = bytes("single", key);
    // 1/N of the model plus at most one padding row per parameter.
    EXPECT_LE(bytes("m2", key), single / 2 * 1.05) << key;
    EXPECT_GE(bytes("m2", key), single / 2 * 0.95) << key;
    EXPECT_LE(bytes("m4", key), single / 4 * 1.10) << key;
    EXPECT_GE(bytes("m4", key), single / 4 * 0.85) << key;
  }
  // The gathered units at their peak: more than one unit, less than the whole model twice.
  EXPECT_GT(bytes("m4", "unsharded_peak_bytes"), 0);
  EXPECT_LT(bytes("m4", "unsharded_peak_bytes"), 2 * bytes("single", "param_bytes"));
}

TEST_F(FsdpTest, ShardedCheckpointsResumeAnywhereAndConsolidate) {
  const std::vector<std::string> common = {"--strategy", "fsdp", "-b", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> out = common;
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  };
  auto straight = train(4, "straight", with({"-e", "straight", "--max-steps", "12", "--final-weights", weights("straight")}));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  ASSERT_EQ(train(4, "resumed", with({"-e", "resumed", "--max-steps", "6"})).exit_code, 0);
  const fs::path step6 = dir_ / "out" / "resumed" / "checkpoints" / "step_000000006";
  ASSERT_TRUE(fs::exists(step6 / "fsdp_index.json"));
  ASSERT_TRUE(fs::exists(step6 / "shard-00003-of-00004.safetensors"));
  // A copy of the 6-step experiment, resumed later at 2 ranks.
  fs::copy(dir_ / "out" / "resumed", dir_ / "out" / "narrower", fs::copy_options::recursive);

  auto resumed = train(4, "resumed", with({"-e", "resumed", "--max-steps", "12", "--final-weights", weights("resumed")}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos);
  EXPECT_EQ(losses("straight"), losses("resumed"));
  EXPECT_EQ(file_checksum(weights("straight")), file_checksum(weights("resumed"))) << "bit-identical continuation";

  // The same global batch at 2 ranks: each rank reads its new rows from the 4-rank shards.
  auto narrower = train(2, "narrower", {"--strategy", "fsdp", "-b", "4", "-e", "narrower", "--max-steps", "12"});
  ASSERT_EQ(narrower.exit_code, 0) << narrower.output;
  EXPECT_NE(narrower.output.find("resuming from"), std::string::npos);
  auto a = losses("straight"), b = losses("narrower");
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_LE(std::fabs(a[6 + i] - b[i]) / a[6 + i], 1e-5) << "step " << 7 + i;

  // Consolidate the 12-step checkpoint; a single-device run started from it (lr 0) holds the
  // same weights bit for bit, and so does a 3-rank FSDP run that reads its rows by byte range
  // (GPT-2's Conv1D weights are stored transposed: columns of the file).
  const fs::path step12 = dir_ / "out" / "resumed" / "checkpoints" / "step_000000012";
  const std::string hf = (dir_ / "consolidated").string();
  auto cons = run({DDX_BIN, "checkpoint", "consolidate", step12.string(), "-o", hf});
  ASSERT_EQ(cons.exit_code, 0) << cons.output;
  EXPECT_NE(cons.output.find("from 4 shards"), std::string::npos) << cons.output;
  ASSERT_TRUE(fs::exists(fs::path(hf) / "config.json"));
  auto reload = train(0, "reload", {"-b", "8", "--init-from", hf, "--lr", "0", "--max-steps", "1", "--final-weights", weights("reload")});
  ASSERT_EQ(reload.exit_code, 0) << reload.output;
  EXPECT_EQ(file_checksum(weights("reload")), file_checksum(weights("straight")));
  auto sharded_load = train(3, "sharded_load", {"--strategy", "fsdp", "-b", "2", "--init-from", hf, "--lr", "0",
                                                "--max-steps", "1", "--final-weights", weights("sharded_load")});
  ASSERT_EQ(sharded_load.exit_code, 0) << sharded_load.output;
  EXPECT_EQ(file_checksum(weights("sharded_load")), file_checksum(weights("straight")));
}

// Checkpoints are keyed by parameter name and row: FSDP resumes a DDP checkpoint, and the
// single-device trainer resumes an FSDP one; the run continues as if never interrupted.
TEST_F(FsdpTest, ResumesAcrossStrategies) {
  auto straight = train(0, "straight", {"-b", "8", "--max-steps", "10"});
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  ASSERT_EQ(train(2, "cross", {"--strategy", "ddp", "-b", "4", "-e", "cross", "--max-steps", "4"}).exit_code, 0);
  auto f = train(2, "cross", {"--strategy", "fsdp", "-b", "4", "-e", "cross", "--max-steps", "8"});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("step_000000004 at step 4"), std::string::npos) << f.output;
  auto s = train(0, "cross", {"-b", "8", "-e", "cross", "--max-steps", "10"});
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("step_000000008 at step 8"), std::string::npos) << s.output;
  // One metrics file across the three runs: steps 1-4 DDP, 5-8 FSDP, 9-10 single.
  auto a = losses("straight"), b = losses("cross");
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_LE(std::fabs(a[i] - b[i]) / a[i], 1e-5) << "step " << i + 1;
}

TEST_F(FsdpTest, BadInputFailsWithOneLineAndKeepsFiles) {
  auto misplaced = train(0, "misplaced", {"--cpu-offload", "--max-steps", "1"});
  EXPECT_EQ(misplaced.exit_code, 2);
  EXPECT_NE(misplaced.output.find("--cpu-offload applies to --strategy fsdp"), std::string::npos) << misplaced.output;
  auto mp = train(0, "mp", {"--strategy", "fsdp", "--dtype", "bf16", "--mp-param-dtype", "bf16", "--max-steps", "1"});
  EXPECT_EQ(mp.exit_code, 2);
  EXPECT_NE(mp.output.find("--mp-param-dtype/--mp-reduce-dtype need --dtype fp32"), std::string::npos) << mp.output;

  // A 2-rank checkpoint to damage.
  ASSERT_EQ(train(2, "ck", {"--strategy", "fsdp", "-b", "4", "-e", "ck", "--max-steps", "2"}).exit_code, 0);
  const fs::path step2 = dir_ / "out" / "ck" / "checkpoints" / "step_000000002";
  auto missing = run({DDX_BIN, "checkpoint", "consolidate", (dir_ / "nowhere").string(), "-o", (dir_ / "x").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("nowhere does not exist"), std::string::npos) << missing.output;

  const std::string out = (dir_ / "hf").string();
  ASSERT_EQ(run({DDX_BIN, "checkpoint", "consolidate", step2.string(), "-o", out}).exit_code, 0);
  const std::string before = file_checksum(out + "/model.safetensors");
  auto again = run({DDX_BIN, "checkpoint", "consolidate", step2.string(), "-o", out});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already holds a model.safetensors"), std::string::npos) << again.output;
  EXPECT_EQ(file_checksum(out + "/model.safetensors"), before) << "nothing overwritten";

  // Flip one byte of a shard: consolidate and resume both refuse, naming the file.
  const fs::path shard = step2 / "shard-00001-of-00002.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto corrupt = run({DDX_BIN, "checkpoint", "consolidate", step2.string(), "-o", (dir_ / "hf2").string()});
  EXPECT_EQ(corrupt.exit_code, 2);
  EXPECT_NE(corrupt.output.find("shard-00001-of-00002.safetensors does not match its checksum"), std::string::npos)
      << corrupt.output;
  EXPECT_FALSE(fs::exists(dir_ / "hf2" / "model.safetensors"));
  auto resume = train(2, "resume_corrupt", {"--strategy", "fsdp", "-b", "4", "-e", "ck", "--max-steps", "4"});
  EXPECT_NE(resume.exit_code, 0);
  EXPECT_NE(resume.output.find("shard-00001-of-00002.safetensors"), std::string::npos) << resume.output;
  fs::remove(shard);
  auto gone = run({DDX_BIN, "checkpoint", "consolidate", step2.string(), "-o", (dir_ / "hf3").string()});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.output.find("missing shard file shard-00001-of-00002.safetensors"), std::string::npos) << gone.output;
}

}  // namespace
}  // namespace ddx::testing
