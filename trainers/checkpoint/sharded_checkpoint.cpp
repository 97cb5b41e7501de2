#include "checkpoint/sharded_checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "ddx/processes/atomic_file.h"
#include "ddx/checksum.h"
#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "models/safetensors.h"
#include "checkpoint/shard_layout.h"

namespace ddx::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "ddx-fsdp-shards";
constexpr int kVersion = 2;  // 1: whole-row pieces only (FSDP); 2: blocks at any offset (TP, 2D)

// A piece's key in its shard file: the parameter name, or for a block name@o0,o1,...
std::string piece_key(const ShardEntry& e) {
  if (e.offset.empty()) return e.name;
  std::string key = e.name + "@";
  for (size_t d = 0; d < e.offset.size(); ++d) key += (d ? "," : "") + std::to_string(e.offset[d]);
  return key;
}

void write_index(const std::string& dir, int world_size, const json& parameters, int version,
                 const models::ModelConfig& config) {
  json files = json::object();
  for (int r = 0; r < world_size; ++r) {
    const std::string name = shard_file_name(r, world_size);
    files[name] = file_checksum((fs::path(dir) / name).string());
  }
  json index = {{"format", kFormat}, {"version", version}, {"world_size", world_size}, {"model", config.name},
                {"parameters", parameters}, {"files", files}};
  write_file_atomically((fs::path(dir) / kShardIndexFile).string(), index.dump(1) + "\n");
  write_file_atomically((fs::path(dir) / "config.json").string(), models::to_hf_config_json(config));
}

int64_t volume(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace

std::string shard_file_name(int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.safetensors", rank, world_size);
  return name;
}

void write_shard_file(const std::string& dir, int rank, int world_size, const std::vector<ShardEntry>& entries) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const ShardEntry& e : entries) {
    if (e.row_end == e.row_begin) continue;  // a rank past the end of a short dim 0 owns nothing
    const std::string key = piece_key(e);
    tensors.emplace_back(key, e.rows);
    if (e.state != nullptr && e.state->step > 0) {
      tensors.emplace_back(key + ".exp_avg", e.state->exp_avg);
      tensors.emplace_back(key + ".exp_avg_sq", e.state->exp_avg_sq);
      tensors.emplace_back(key + ".step", torch::scalar_tensor(e.state->step, torch::kInt64));
    }
  }
  models::write_safetensors((fs::path(dir) / shard_file_name(rank, world_size)).string(), tensors,
                            {{"format", kFormat}, {"rank", std::to_string(rank)}, {"world_size", std::to_string(world_size)}});
}

void write_shard_index(const std::string& dir, int world_size, const std::vector<ShardEntry>& entries,
                       const models::ModelConfig& config) {
  json parameters = json::array();
  for (const ShardEntry& e : entries) {
    ShardedParameter p = make_unit_layout("", {{e.name, e.shape}}, world_size).parameters[0];
    json shards = json::array();
    for (int r = 0; r < world_size; ++r) {
      if (p.owned_rows(r) == 0) continue;
      shards.push_back({{"file", shard_file_name(r, world_size)}, {"rows", {p.row_begin(r), p.row_end(r)}}});
    }
    parameters.push_back({{"name", e.name}, {"shape", e.shape}, {"shards", shards}});
  }
  write_index(dir, world_size, parameters, 1, config);
}

void write_piece_index(const std::string& dir, int world_size, const ParameterShapes& shapes,
                       const models::ModelConfig& config) {
  // Every piece a file holds, from its keys: name@offsets, shape from the header.
  std::map<std::string, std::vector<json>> pieces;
  for (int r = 0; r < world_size; ++r) {
    const std::string file = shard_file_name(r, world_size);
    for (const auto& [key, info] : models::read_safetensors_index((fs::path(dir) / file).string())) {
      // name@o0,o1,... ; the optimizer state's keys (…,o1.exp_avg) are not pieces.
      const size_t at = key.find('@');
      if (at == std::string::npos) continue;
      const std::string offsets = key.substr(at + 1);
      if (offsets.empty() || offsets.find_first_not_of("0123456789,") != std::string::npos) continue;
      std::vector<int64_t> offset;
      for (size_t begin = 0; begin <= offsets.size();) {
        const size_t end = std::min(offsets.find(',', begin), offsets.size());
        offset.push_back(std::stoll(offsets.substr(begin, end - begin)));
        begin = end + 1;
      }
      pieces[key.substr(0, at)].push_back({{"file", file}, {"tensor", key}, {"offset", offset}, {"shape", info.shape}});
    }
  }
  json parameters = json::array();
  for (const auto& [name, shape] : shapes) {
    parameters.push_back({{"name", name}, {"shape", shape}, {"shards", pieces[name]}});
  }
  write_index(dir, world_size, parameters, 2, config);
}

bool is_sharded_checkpoint(const std::string& dir) { return fs::exists(fs::path(dir) / kShardIndexFile); }

std::unique_ptr<CheckpointRows> CheckpointRows::open(const std::string& dir, const ParameterShapes& expected,
                                                     bool verify_checksums) {
  auto reader = std::unique_ptr<CheckpointRows>(new CheckpointRows());
  reader->dir_ = dir;
  const fs::path index_path = fs::path(dir) / kShardIndexFile;
  if (fs::exists(index_path)) {
    reader->sharded_ = true;
    std::ifstream in(index_path);
    json index = json::parse(in, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](const std::string& why) {
      return UsageError("checkpoint " + dir + ": " + kShardIndexFile + " " + why);
    };
    if (index.is_discarded() || !index.is_object()) throw bad("is not valid JSON");
    try {
      if (index.at("format").get<std::string>() != kFormat) throw bad("is not a ddx FSDP index");
      if (index.at("version").get<int>() > kVersion)
        throw bad("has version " + std::to_string(index.at("version").get<int>()) + ", newer than this ddx reads (" +
                  std::to_string(kVersion) + ")");
      reader->world_size_ = index.at("world_size").get<int>();
      for (const auto& p : index.at("parameters")) {
        const std::string name = p.at("name").get<std::string>();
        const auto shape = p.at("shape").get<std::vector<int64_t>>();
        if (shape.empty()) throw bad("gives parameter '" + name + "' no dimensions");
        reader->parameters_.emplace_back(name, shape);
        std::vector<Piece>& pieces = reader->pieces_[name];
        for (const auto& s : p.at("shards")) {
          Piece piece{s.at("file").get<std::string>(), s.value("tensor", name), {}, {}};
          if (s.contains("offset")) {
            piece.offset = s.at("offset").get<std::vector<int64_t>>();
            piece.shape = s.at("shape").get<std::vector<int64_t>>();
          } else {
            const int64_t b = s.at("rows").at(0).get<int64_t>(), e = s.at("rows").at(1).get<int64_t>();
            piece.offset.assign(shape.size(), 0);
            piece.offset[0] = b;
            piece.shape = shape;
            piece.shape[0] = e - b;
          }
          bool inside = piece.offset.size() == shape.size() && piece.shape.size() == shape.size();
          for (size_t d = 0; inside && d < shape.size(); ++d) {
            inside = piece.offset[d] >= 0 && piece.shape[d] > 0 && piece.offset[d] + piece.shape[d] <= shape[d];
          }
          if (!inside) throw bad("gives parameter '" + name + "' overlapping or out-of-range shard rows");
          pieces.push_back(std::move(piece));
        }
        // Disjoint pieces whose volumes add up to the tensor's cover it exactly. Sorted by first
        // row, a piece can only overlap those that start before it ends.
        std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
        int64_t covered = 0;
        for (size_t i = 0; i < pieces.size(); ++i) {
          covered += volume(pieces[i].shape);
          for (size_t j = i + 1; j < pieces.size() && pieces[j].offset[0] < pieces[i].offset[0] + pieces[i].shape[0]; ++j) {
            bool overlap = true;
            for (size_t d = 0; overlap && d < shape.size(); ++d) {
              overlap = pieces[j].offset[d] < pieces[i].offset[d] + pieces[i].shape[d] &&
                        pieces[i].offset[d] < pieces[j].offset[d] + pieces[j].shape[d];
            }
            if (overlap) throw bad("gives parameter '" + name + "' overlapping or out-of-range shard rows");
          }
        }
        if (covered != volume(shape)) throw bad("leaves rows of parameter '" + name + "' in no shard");
      }
      for (const auto& [file, checksum] : index.at("files").items()) {
        const fs::path path = fs::path(dir) / file;
        if (!fs::exists(path)) throw UsageError("checkpoint " + dir + " is missing shard file " + file);
        if (verify_checksums && file_checksum(path.string()) != checksum.get<std::string>())
          throw UsageError("checkpoint " + dir + " is corrupt: " + file + " does not match its checksum in " +
                           kShardIndexFile);
      }
    } catch (const json::exception& e) {
      throw bad(std::string("is malformed: ") + e.what());
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    const std::string model_file = "model.safetensors";
    reader->files_[model_file] = models::read_safetensors_index((fs::path(dir) / model_file).string());
    for (const auto& [name, info] : reader->files_[model_file]) {
      if (info.shape.empty()) throw UsageError("checkpoint " + dir + ": tensor '" + name + "' is a scalar");
      reader->parameters_.emplace_back(name, info.shape);
      reader->pieces_[name].push_back({model_file, name, std::vector<int64_t>(info.shape.size(), 0), info.shape});
    }
    if (fs::exists(fs::path(dir) / "optimizer.safetensors")) reader->optimizer_file_ = "optimizer.safetensors";
  } else {
    throw UsageError("checkpoint " + dir + " has neither " + kShardIndexFile + " nor model.safetensors");
  }

  if (!expected.empty()) {
    std::map<std::string, std::vector<int64_t>> have(reader->parameters_.begin(), reader->parameters_.end());
    std::vector<std::string> problems;
    std::set<std::string> wanted;
    for (const auto& [name, shape] : expected) {
      wanted.insert(name);
      auto it = have.find(name);
      if (it == have.end()) problems.push_back("no tensor '" + name + "'");
      else if (it->second != shape)
        problems.push_back("tensor '" + name + "' has shape " + shape_text(it->second) + ", the model needs " + shape_text(shape));
    }
    for (const auto& [name, shape] : reader->parameters_) {
      if (!wanted.count(name)) problems.push_back("unexpected tensor '" + name + "'");
    }
    if (!problems.empty()) {
      std::string message = "checkpoint " + dir + " does not fit the model: " + problems[0];
      if (problems.size() > 1) message += " (and " + std::to_string(problems.size() - 1) + " more)";
      throw UsageError(message);
    }
  }
  return reader;
}

const models::TensorInfo* CheckpointRows::find(const std::string& file, const std::string& tensor) const {
  auto it = files_.find(file);
  if (it == files_.end()) it = files_.emplace(file, models::read_safetensors_index((fs::path(dir_) / file).string())).first;
  auto t = it->second.find(tensor);
  return t == it->second.end() ? nullptr : &t->second;
}

torch::Tensor CheckpointRows::assemble(const std::string& name, const std::string& suffix, int64_t begin,
                                       int64_t end) const {
  auto pieces = pieces_.find(name);
  if (pieces == pieces_.end()) throw UsageError("checkpoint " + dir_ + " has no tensor '" + name + "'");
  torch::Tensor out;
  for (const Piece& piece : pieces->second) {
    const int64_t first = piece.offset[0];
    const int64_t b = std::max(begin, first), e = std::min(end, first + piece.shape[0]);
    if (b >= e) continue;
    // Unsharded checkpoints keep the optimizer state in a file of its own.
    const std::string file = (!sharded_ && !suffix.empty()) ? optimizer_file_ : piece.file;
    const models::TensorInfo* info = file.empty() ? nullptr : find(file, piece.tensor + suffix);
    if (info == nullptr) return {};
    torch::Tensor part = models::read_tensor_rows(*info, b - first, e - first);
    if (!out.defined()) {
      std::vector<int64_t> shape = part.sizes().vec();
      for (const auto& [n, full] : parameters_) {
        if (n == name) shape = full;
      }
      shape[0] = end - begin;
      out = torch::empty(shape, part.options());
    }
    // The piece's block of these rows (whole rows for FSDP pieces).
    torch::Tensor block = out.narrow(0, b - begin, e - b);
    for (size_t d = 1; d < piece.offset.size(); ++d) block = block.narrow(static_cast<int64_t>(d), piece.offset[d], piece.shape[d]);
    block.copy_(part);
  }
  return out;
}

torch::Tensor CheckpointRows::rows(const std::string& name, int64_t begin, int64_t end) const {
  torch::Tensor t = assemble(name, "", begin, end);
  if (!t.defined()) throw UsageError("checkpoint " + dir_ + " has no rows of tensor '" + name + "'");
  return t;
}

std::optional<AdamWState> CheckpointRows::optimizer_rows(const std::string& name, int64_t begin, int64_t end,
                                                         const torch::Tensor& like) const {
  if (begin >= end) return std::nullopt;
  AdamWState s;
  s.exp_avg = assemble(name, ".exp_avg", begin, end);
  s.exp_avg_sq = assemble(name, ".exp_avg_sq", begin, end);
  if (!s.exp_avg.defined() || !s.exp_avg_sq.defined()) return std::nullopt;
  s.exp_avg = s.exp_avg.to(like.device(), like.scalar_type());
  s.exp_avg_sq = s.exp_avg_sq.to(like.device(), like.scalar_type());
  for (const Piece& piece : pieces_.at(name)) {
    if (std::max(begin, piece.offset[0]) >= std::min(end, piece.offset[0] + piece.shape[0])) continue;
    const models::TensorInfo* step = find(sharded_ ? piece.file : optimizer_file_, piece.tensor + ".step");
    if (step == nullptr) throw UsageError("checkpoint " + dir_ + " has optimizer state but no step for '" + name + "'");
    s.step = models::read_tensor(*step).item<int64_t>();
    break;
  }
  return s;
}

}  // namespace ddx::train
