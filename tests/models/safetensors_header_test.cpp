// The safetensors header parser on in-memory files: every check has a case that trips it, the
// fuzz target's seed corpus runs through the fuzz entry point, and deterministic mutations of
// that corpus stand in for a short fuzzing session in every CI build.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ddx/errors/errors.h"
#include "models/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ddx::models {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes, uint64_t length_field = UINT64_MAX) {
  const uint64_t n = length_field == UINT64_MAX ? header.size() : length_field;
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(n >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  return bytes;
}

SafetensorsHeader parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), "model.safetensors");
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse(bytes);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "header accepted";
  return "";
}

TEST(SafetensorsHeader, ParsesTensorsMetadataAndAbsoluteOffsets) {
  const std::string header =
      R"({"b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},)"
      R"( "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "s": {"dtype": "I64", "shape": [], "data_offsets": [32, 40]},)"
      R"( "e": {"dtype": "F16", "shape": [0, 7], "data_offsets": [40, 40]},)"
      R"( "__metadata__": {"format": "pt"}}   )";
  const SafetensorsHeader h = parse(make_file(header, 40));
  EXPECT_EQ(h.header_bytes, header.size());
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  const TensorInfo& a = h.tensors[0];  // sorted by offset
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, "F32");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.file, "model.safetensors");
  EXPECT_EQ(a.data_begin, 8 + header.size());
  EXPECT_EQ(a.data_end, 8 + header.size() + 24);
  EXPECT_EQ(h.tensors[2].name, "s");
  EXPECT_TRUE(h.tensors[2].shape.empty());
  EXPECT_EQ(h.tensors[3].name, "e");
  EXPECT_EQ(parse(make_file("{}", 0)).tensors.size(), 0u);
}

struct BadHeader {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string expected;
};

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}";
}

TEST(SafetensorsHeader, EveryMalformedHeaderIsRefusedNamingFileAndTensor) {
  const std::vector<BadHeader> cases = {
      {"too short", {1, 0, 0}, "shorter than the 8-byte header length"},
      {"length over limit", make_file("{}", 0, 100'000'001), "exceeds the limit"},
      {"length past end", make_file("{}", 0, 4096), "runs past the end of the file"},
      {"length near 2^64", make_file("{}", 0, UINT64_MAX - 3), "exceeds the limit"},
      {"empty header", make_file("", 0), "does not start with '{'"},
      {"not an object", make_file("[1, 2]", 0), "does not start with '{'"},
      {"truncated JSON", make_file(R"({"a": {"dtype": )", 0), "not valid JSON"},
      {"invalid UTF-8", make_file("{\"\xff\": 1}", 0), "not valid JSON"},
      {"duplicate tensor", make_file(R"({"a": )" + entry("U8", "[1]", "[0, 1]") + R"(, "a": )" + entry("U8", "[1]", "[1, 2]") + "}", 2),
       "key 'a' twice"},
      {"entry not an object", make_file(R"({"a": 5})", 0), "tensor 'a': entry must be an object"},
      {"unknown field", make_file(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})", 1),
       "tensor 'a': unknown field 'x'"},
      {"dtype missing", make_file(R"({"a": {"shape": [1], "data_offsets": [0, 1]}})", 1), "tensor 'a': 'dtype'"},
      {"unknown dtype", make_file(R"({"w": )" + entry("F128", "[1]", "[0, 16]") + "}", 16), "tensor 'w': unknown dtype 'F128'"},
      {"shape not array", make_file(R"({"w": )" + entry("U8", "3", "[0, 3]") + "}", 3), "tensor 'w': 'shape'"},
      {"negative dim", make_file(R"({"w": )" + entry("U8", "[-1]", "[0, 0]") + "}", 0), "tensor 'w': shape entry -1"},
      {"fractional dim", make_file(R"({"w": )" + entry("U8", "[1.5]", "[0, 1]") + "}", 1), "tensor 'w': shape entry 1.5"},
      {"shape overflow", make_file(R"({"w": )" + entry("F64", "[4611686018427387904, 4]", "[0, 8]") + "}", 8),
       "tensor 'w': shape [4611686018427387904,4] overflows"},
      {"bytes overflow", make_file(R"({"w": )" + entry("F64", "[4611686018427387904]", "[0, 8]") + "}", 8),
       "tensor 'w': holds 8 bytes"},
      {"offsets missing", make_file(R"({"w": {"dtype": "U8", "shape": [1]}})", 1), "tensor 'w': 'data_offsets' is missing"},
      {"offsets wrong arity", make_file(R"({"w": )" + entry("U8", "[1]", "[0, 1, 2]") + "}", 1), "tensor 'w': 'data_offsets' must be"},
      {"offsets negative", make_file(R"({"w": )" + entry("U8", "[1]", "[-1, 0]") + "}", 1), "tensor 'w': 'data_offsets' must be"},
      {"offsets reversed", make_file(R"({"w": )" + entry("U8", "[0]", "[4, 0]") + "}", 4), "tensor 'w': data_offsets [4,0] end before"},
      {"size mismatch", make_file(R"({"w": )" + entry("F32", "[3]", "[0, 8]") + "}", 8), "tensor 'w': holds 8 bytes but dtype F32"},
      {"past end of data", make_file(R"({"w": )" + entry("U8", "[64]", "[0, 64]") + "}", 8), "tensor 'w': data_offsets end 64 is past"},
      {"overlap", make_file(R"({"a": )" + entry("U8", "[8]", "[0, 8]") + R"(, "b": )" + entry("U8", "[8]", "[4, 12]") + "}", 12),
       "tensor 'b': overlaps tensor 'a'"},
      {"gap", make_file(R"({"a": )" + entry("U8", "[4]", "[0, 4]") + R"(, "b": )" + entry("U8", "[4]", "[8, 12]") + "}", 12),
       "tensor 'b': starts 4 bytes after"},
      {"gap at start", make_file(R"({"a": )" + entry("U8", "[4]", "[4, 8]") + "}", 8), "tensor 'a': starts 4 bytes after"},
      {"trailing bytes", make_file(R"({"a": )" + entry("U8", "[4]", "[0, 4]") + "}", 12), "8 bytes after the last tensor"},
      {"metadata not object", make_file(R"({"__metadata__": [1]})", 0), "__metadata__ must be an object"},
      {"metadata not strings", make_file(R"({"__metadata__": {"n": 1}})", 0), "__metadata__ value of 'n'"},
  };
  for (const BadHeader& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message = parse_error(c.bytes);
    EXPECT_EQ(message.rfind("model.safetensors: invalid safetensors file: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST(SafetensorsHeader, ChecksOffsetsAgainstTheWholeFileNotTheBuffer) {
  // A reader passes only the header bytes; the data section is sized from the file size.
  const std::string header = R"({"a": )" + entry("U8", "[16]", "[0, 16]") + "}";
  std::vector<uint8_t> bytes = make_file(header, 0);
  const SafetensorsHeader h = parse_safetensors_header(bytes.data(), bytes.size(), bytes.size() + 16, "f");
  EXPECT_EQ(h.tensors.at(0).data_end, bytes.size() + 16);
  EXPECT_THROW(parse_safetensors_header(bytes.data(), bytes.size(), bytes.size() + 15, "f"), UsageError);
  EXPECT_THROW(parse_safetensors_header(bytes.data(), 10, bytes.size() + 16, "f"), UsageError);  // header cut
}

std::vector<std::vector<uint8_t>> corpus() {
  std::vector<std::vector<uint8_t>> files;
  for (const auto& entry : fs::directory_iterator(DDX_FUZZ_CORPUS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

TEST(SafetensorsHeaderFuzz, SeedCorpusRunsThroughTheFuzzTarget) {
  const auto files = corpus();
  ASSERT_GE(files.size(), 20u) << "corpus missing; run tests/fuzz/make_safetensors_corpus.py";
  int accepted = 0;
  for (const auto& bytes : files) {
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    try {
      parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), "seed");
      ++accepted;
    } catch (const UsageError&) {
    }
  }
  EXPECT_EQ(accepted, 3);  // the three valid_* seeds
}

TEST(SafetensorsHeaderFuzz, DeterministicMutationsNeverEscapeAsAnythingButUsageError) {
  uint64_t state = 0x243F6A8885A308D3ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const auto files = corpus();
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::vector<uint8_t> bytes = files[next() % files.size()];
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = next() % bytes.size();
      switch (next() % 5) {
        case 0: bytes[at] ^= static_cast<uint8_t>(1u << (next() % 8)); break;          // bit flip
        case 1: bytes[at] = static_cast<uint8_t>("{}[]\",:0123456789-e. "[next() % 21]); break;
        case 2: bytes.resize(at); break;                                             // truncate
        case 3: bytes.insert(bytes.begin() + static_cast<long>(at), static_cast<uint8_t>(next())); break;
        case 4: if (bytes.size() >= 8) bytes[next() % 8] = static_cast<uint8_t>(next()); break;  // length field
      }
    }
    ASSERT_NO_THROW(LLVMFuzzerTestOneInput(bytes.data(), bytes.size())) << "iteration " << iteration;
  }
}

}  // namespace
}  // namespace ddx::models
