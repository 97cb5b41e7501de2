// safetensors files on disk: round trips, sharded indexes, folders, row-range reads, errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "ddx/errors/errors.h"
#include "models/safetensors.h"
#include "models_test_util.h"

namespace ddx::models {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;
using testutil::usage_error;

std::vector<std::pair<std::string, torch::Tensor>> sample_tensors() {
  torch::manual_seed(0);
  return {
      {"f32", torch::randn({5, 7})},
      {"bf16", torch::randn({3, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({9}).to(torch::kFloat16)},
      {"f64", torch::randn({2, 3, 4}, torch::kFloat64)},
      {"i64", torch::arange(11, torch::kInt64)},
      {"i32", torch::arange(-3, 3, torch::kInt32)},
      {"u8", torch::arange(200, 205, torch::kInt64).to(torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.5)},
      {"empty", torch::empty({0, 4})},
      {"transposed", torch::randn({4, 6}).t()},  // non-contiguous input
  };
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  TempDir dir;
  const std::string path = dir.path() + "/sub/t.safetensors";  // parent folder created
  const auto tensors = sample_tensors();
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "x"}});
  const auto index = read_safetensors_index(path);
  ASSERT_EQ(index.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    const TensorInfo& info = index.at(name);
    EXPECT_EQ(info.file, path);
    EXPECT_EQ(info.dtype, safetensors_dtype(tensor.scalar_type()));
    EXPECT_EQ(info.shape, tensor.sizes().vec());
    const torch::Tensor back = read_tensor(info);
    EXPECT_EQ(back.scalar_type(), tensor.scalar_type());
    EXPECT_TRUE(torch::equal(back, tensor));
  }
  // Data starts 8-byte aligned, and no temporary file is left behind.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), 8);
  EXPECT_EQ(header_bytes % 8, 0u);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path() + "/sub")) ++files;
  EXPECT_EQ(files, 1);
  // Overwriting replaces the file.
  write_safetensors(path, {{"only", torch::ones({2})}});
  EXPECT_EQ(read_safetensors_index(path).size(), 1u);
}

TEST(Safetensors, WriterRejectsRepeatedOrReservedNames) {
  TempDir dir;
  EXPECT_THROW(write_safetensors(dir.path() + "/a.safetensors", {{"a", torch::ones(1)}, {"a", torch::ones(1)}}),
               std::invalid_argument);
  EXPECT_THROW(write_safetensors(dir.path() + "/a.safetensors", {{"__metadata__", torch::ones(1)}}),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir.path() + "/a.safetensors"));
}

TEST(Safetensors, RowRangeReadsOnlyThoseBytes) {
  TempDir dir;
  const std::string path = dir.path() + "/rows.safetensors";
  const torch::Tensor first = torch::arange(6, torch::kFloat32);
  const torch::Tensor big = torch::randn({17, 3, 5});
  write_safetensors(path, {{"first", first}, {"big", big}});
  const TensorInfo info = read_safetensors_index(path).at("big");
  for (auto [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 17}, {0, 1}, {5, 11}, {16, 17}, {4, 4}}) {
    const torch::Tensor rows = read_tensor_rows(info, a, b);
    EXPECT_EQ(rows.sizes().vec(), (std::vector<int64_t>{b - a, 3, 5}));
    EXPECT_TRUE(torch::equal(rows, big.slice(0, a, b))) << a << ".." << b;
  }
  // Cut the file right after row 9: rows [5, 9) still read, the whole tensor no longer does.
  fs::resize_file(path, info.data_begin + 9 * 15 * 4);
  EXPECT_TRUE(torch::equal(read_tensor_rows(info, 5, 9), big.slice(0, 5, 9)));
  const std::string message = usage_error([&] { read_tensor(info); });
  EXPECT_NE(message.find("'big'"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(usage_error([&] { read_tensor_rows(info, 3, 18); }).find("has no rows [3, 18)"), std::string::npos);
  EXPECT_NE(usage_error([&] { read_tensor_rows(info, 4, 3); }).find("'big'"), std::string::npos);
  EXPECT_NE(usage_error([&] { read_tensor_rows(info, -1, 3); }).find("'big'"), std::string::npos);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Safetensors, ShardedIndexAndFolders) {
  TempDir dir;
  const torch::Tensor a = torch::randn({3, 4}), b = torch::randn({5}), c = torch::randn({2, 2});
  write_safetensors(dir.path() + "/model-00001-of-00002.safetensors", {{"a", a}, {"b", b}});
  write_safetensors(dir.path() + "/model-00002-of-00002.safetensors", {{"c", c}});
  write_text(dir.path() + "/model.safetensors.index.json",
             R"({"metadata": {"total_size": 100}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  for (const std::string& path : {dir.path(), dir.path() + "/model.safetensors.index.json"}) {
    const auto index = read_safetensors_index(path);
    ASSERT_EQ(index.size(), 3u);
    EXPECT_TRUE(torch::equal(read_tensor(index.at("a")), a));
    EXPECT_TRUE(torch::equal(read_tensor(index.at("b")), b));
    EXPECT_TRUE(torch::equal(read_tensor(index.at("c")), c));
    EXPECT_EQ(index.at("c").file, dir.path() + "/model-00002-of-00002.safetensors");
  }
  // A folder with a single model.safetensors.
  TempDir single;
  write_safetensors(single.path() + "/model.safetensors", {{"x", a}});
  EXPECT_TRUE(torch::equal(read_tensor(read_safetensors_index(single.path()).at("x")), a));
}

TEST(Safetensors, BadIndexesAndPathsAreUsageErrors) {
  TempDir dir;
  write_safetensors(dir.path() + "/s1.safetensors", {{"a", torch::ones(2)}, {"b", torch::ones(3)}});
  const std::string index = dir.path() + "/model.safetensors.index.json";
  struct Case {
    std::string json, expected;
  };
  const std::vector<Case> cases = {
      {"not json", "not valid JSON"},
      {R"({"metadata": {}})", "'weight_map'"},
      {R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "z": "s1.safetensors"}})",
       "tensor 'z' is listed in shard s1.safetensors but not there"},
      {R"({"weight_map": {"a": "s1.safetensors"}})", "tensor 'b' of shard s1.safetensors is not listed"},
      {R"({"weight_map": {"a": "../s1.safetensors", "b": "s1.safetensors"}})", "outside the index's folder"},
      {R"({"weight_map": {"a": "/etc/passwd", "b": "s1.safetensors"}})", "outside the index's folder"},
      {R"({"weight_map": {"a": 3}})", "weight_map entry of 'a'"},
      {R"({"weight_map": {"a": "missing.safetensors", "b": "s1.safetensors"}})", "missing.safetensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    write_text(index, c.json);
    const std::string message = usage_error([&] { read_safetensors_index(dir.path()); });
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  TempDir empty;
  EXPECT_NE(usage_error([&] { read_safetensors_index(empty.path()); }).find("neither model.safetensors"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { read_safetensors_index(empty.path() + "/nope.safetensors"); }).find("nope.safetensors"),
            std::string::npos);
  // A malformed file on disk: the message names the file.
  const std::string bad = empty.path() + "/bad.safetensors";
  write_text(bad, std::string("\x10\0\0\0\0\0\0\0{}", 10));
  const std::string message = usage_error([&] { read_safetensors_index(bad); });
  EXPECT_NE(message.find(bad), std::string::npos) << message;
  EXPECT_NE(message.find("runs past the end"), std::string::npos) << message;
  write_text(bad, "abc");
  EXPECT_NE(usage_error([&] { read_safetensors_index(bad); }).find("shorter than"), std::string::npos);
}

}  // namespace
}  // namespace ddx::models
