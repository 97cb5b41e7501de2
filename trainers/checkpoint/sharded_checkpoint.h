#pragma once
// The sharded checkpoint format that fsdp, tp, 2d and pp share (the file names keep FSDP's,
// which wrote it first). A checkpoint folder holds:
//
//   shard-<r>-of-<W>.safetensors  rank r's pieces of every parameter it owns: <name> (FSDP:
//                                 rows [row_begin, row_end) of dim 0) or <name>@<o0>,<o1>,...
//                                 (TP and 2D: a block of the full tensor at that global offset
//                                 along every dimension, e.g. a column slice of some rows), and,
//                                 once the optimizer has state, the same key + .exp_avg,
//                                 .exp_avg_sq, .step
//   fsdp_index.json               format, world size, each parameter's full shape and which
//                                 file holds which piece (version 1: "rows" only; version 2 adds
//                                 pieces with "tensor", "offset" and "shape"), and a checksum
//                                 of every shard file
//   config.json                   the model (Hugging Face config), so that
//                                 `ddx checkpoint consolidate` needs nothing but the folder
//
// Each rank writes only its own file; nothing is gathered. Loading reads, for each rank, the
// rows it owns under the NEW layout from whichever files hold them (read by byte range), so a
// checkpoint written at W ranks resumes at any world size. CheckpointRows reads the unsharded
// layout of single/DDP checkpoints (model.safetensors, optimizer.safetensors) the same way.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"
#include "models/safetensors_header.h"
#include "optim/adamw.h"

namespace ddx::train {

constexpr const char* kShardIndexFile = "fsdp_index.json";

struct ShardEntry {
  std::string name;
  std::vector<int64_t> shape;     // full shape
  int64_t row_begin = 0, row_end = 0;
  torch::Tensor rows;             // [row_end - row_begin, ...]
  const AdamWState* state = nullptr;
  // A piece that is not whole rows (TP, 2D): its global offset along every dimension (rows is
  // then the block at that offset). Empty: rows [row_begin, row_end) of every column.
  std::vector<int64_t> offset;
};

std::string shard_file_name(int rank, int world_size);

// Every rank: its own file, atomically.
void write_shard_file(const std::string& dir, int rank, int world_size, const std::vector<ShardEntry>& entries);
// Rank 0, after every rank's file is complete: the index (with checksums) and config.json.
// `entries` gives names and shapes (rank 0's own entries will do).
void write_shard_index(const std::string& dir, int world_size, const std::vector<ShardEntry>& entries,
                       const models::ModelConfig& config);

// Rank 0, after every rank's file of pieces (entries with an offset) is complete: the index,
// built from the files' tensors, and config.json. `shapes` lists every parameter's full shape.
using ParameterShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
void write_piece_index(const std::string& dir, int world_size, const ParameterShapes& shapes,
                       const models::ModelConfig& config);

bool is_sharded_checkpoint(const std::string& dir);

class CheckpointRows {
 public:
  // Opens a sharded or unsharded checkpoint folder. With `expected` non-empty the parameters
  // must match it exactly (names and shapes); `verify_checksums` re-checks the shard files
  // against the index (the trainer has already checked every file of a checkpoint it resumes).
  // Problems are UsageErrors naming the folder and the tensor or file.
  static std::unique_ptr<CheckpointRows> open(const std::string& dir, const ParameterShapes& expected,
                                              bool verify_checksums = false);

  bool sharded() const { return sharded_; }
  int world_size() const { return world_size_; }  // 1 for an unsharded checkpoint
  const ParameterShapes& parameters() const { return parameters_; }

  // Rows [begin, end) of dim 0 of a parameter, on CPU in the file's dtype.
  torch::Tensor rows(const std::string& name, int64_t begin, int64_t end) const;
  // The AdamW state of those rows on the device and in the dtype of `like` (the parameter
  // rows it will update), or nullopt when the checkpoint has none for the parameter.
  std::optional<AdamWState> optimizer_rows(const std::string& name, int64_t begin, int64_t end,
                                           const torch::Tensor& like) const;

 private:
  struct Piece {
    std::string file;
    std::string tensor;                  // its key in the file
    std::vector<int64_t> offset, shape;  // the block of the full tensor it holds
  };
  const models::TensorInfo* find(const std::string& file, const std::string& tensor) const;
  torch::Tensor assemble(const std::string& name, const std::string& suffix, int64_t begin, int64_t end) const;

  std::string dir_;
  bool sharded_ = false;
  int world_size_ = 1;
  ParameterShapes parameters_;
  std::map<std::string, std::vector<Piece>> pieces_;                          // per parameter
  // Per file: its tensors, read on first use (a rank reads only the shards holding its rows).
  mutable std::map<std::string, std::map<std::string, models::TensorInfo>> files_;
  std::string optimizer_file_;  // unsharded layout: optimizer.safetensors, if present
};

}  // namespace ddx::train
