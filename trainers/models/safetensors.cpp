// safetensors files on disk: headers through the checked parser, tensor bytes read with
// pread straight into tensor storage (only the bytes asked for), and atomic writes.
#include "models/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ddx/errors/errors.h"

namespace ddx::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0) : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string os_error() { return std::strerror(errno); }

// Reads exactly `bytes` at `offset`; false on a short read (the file shrank under us).
bool pread_all(int fd, void* out, uint64_t bytes, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("cannot write " + path + ": " + os_error());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

std::vector<TensorInfo> read_file_header(const std::string& path) {
  Fd fd(path, O_RDONLY);
  if (fd.get() < 0) throw UsageError("cannot open " + path + ": " + os_error());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw UsageError("cannot stat " + path + ": " + os_error());
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::vector<uint8_t> prefix(8);
  if (file_size < 8 || !pread_all(fd.get(), prefix.data(), 8, 0))
    return parse_safetensors_header(prefix.data(), 0, file_size, path).tensors;  // throws "too short"
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, prefix.data(), 8);
  // Let the parser reject an oversized or truncated length before we allocate for it.
  if (header_bytes > kMaxSafetensorsHeaderBytes || header_bytes > file_size - 8)
    return parse_safetensors_header(prefix.data(), 8, file_size, path).tensors;
  prefix.resize(8 + header_bytes);
  if (!pread_all(fd.get(), prefix.data() + 8, header_bytes, 8))
    throw UsageError("cannot read the header of " + path + ": " + os_error());
  return parse_safetensors_header(prefix.data(), prefix.size(), file_size, path).tensors;
}

json read_index_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw UsageError(path + ": not valid JSON: " + e.what());
  }
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}. Every
// listed tensor must be in its shard, and every tensor of a shard must be listed.
std::map<std::string, TensorInfo> read_sharded(const std::string& index_path) {
  const json index = read_index_json(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    throw UsageError(index_path + ": expected an object with a 'weight_map' object");
  const fs::path folder = fs::path(index_path).parent_path();
  std::map<std::string, std::string> shard_of;
  for (const auto& [tensor, shard] : index.at("weight_map").items()) {
    if (!shard.is_string()) throw UsageError(index_path + ": weight_map entry of '" + tensor + "' is not a file name");
    const std::string name = shard.get<std::string>();
    // Shards live next to the index; a path elsewhere is a malformed (or hostile) index.
    if (name.empty() || fs::path(name).is_absolute() || name.find("..") != std::string::npos)
      throw UsageError(index_path + ": weight_map entry of '" + tensor + "' names shard '" + name +
                       "' outside the index's folder");
    shard_of[tensor] = name;
  }
  std::map<std::string, std::map<std::string, TensorInfo>> shards;
  for (const auto& [tensor, shard] : shard_of) {
    if (shards.count(shard)) continue;
    auto& tensors = shards[shard];
    for (TensorInfo& t : read_file_header((folder / shard).string())) tensors[t.name] = std::move(t);
  }
  std::map<std::string, TensorInfo> result;
  for (const auto& [tensor, shard] : shard_of) {
    auto& tensors = shards.at(shard);
    auto it = tensors.find(tensor);
    if (it == tensors.end())
      throw UsageError(index_path + ": tensor '" + tensor + "' is listed in shard " + shard + " but not there");
    result[tensor] = it->second;
  }
  for (const auto& [shard, tensors] : shards)
    for (const auto& [tensor, info] : tensors)
      if (!shard_of.count(tensor) || shard_of.at(tensor) != shard)
        throw UsageError(index_path + ": tensor '" + tensor + "' of shard " + shard +
                         " is not listed for that shard in weight_map");
  return result;
}

std::string describe_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

torch::Tensor read_bytes_into(const TensorInfo& info, std::vector<int64_t> shape, uint64_t offset, uint64_t bytes) {
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(torch_dtype(info.dtype)));
  if (bytes == 0) return out;
  Fd fd(info.file, O_RDONLY);
  if (fd.get() < 0) throw UsageError("cannot open " + info.file + ": " + os_error());
  if (!pread_all(fd.get(), out.data_ptr(), bytes, offset))
    throw UsageError(info.file + ": tensor '" + info.name + "' cannot be read (file truncated or unreadable: " +
                     os_error() + ")");
  return out;
}

}  // namespace

std::string safetensors_dtype(torch::Dtype dtype) {
  switch (dtype) {
    case torch::kFloat64: return "F64";
    case torch::kFloat32: return "F32";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kInt64: return "I64";
    case torch::kInt32: return "I32";
    case torch::kInt16: return "I16";
    case torch::kInt8: return "I8";
    case torch::kUInt8: return "U8";
    case torch::kBool: return "BOOL";
    case torch::kFloat8_e4m3fn: return "F8_E4M3";
    case torch::kFloat8_e5m2: return "F8_E5M2";
    default: throw UsageError(std::string("no safetensors dtype for torch dtype ") + c10::toString(dtype));
  }
}

torch::Dtype torch_dtype(const std::string& name) {
  static const std::map<std::string, torch::Dtype> dtypes = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32},
      {"I16", torch::kInt16}, {"I8", torch::kInt8}, {"U8", torch::kUInt8}, {"BOOL", torch::kBool},
      {"F8_E4M3", torch::kFloat8_e4m3fn}, {"F8_E5M2", torch::kFloat8_e5m2}};
  auto it = dtypes.find(name);
  if (it == dtypes.end()) throw UsageError("unknown safetensors dtype '" + name + "'");
  return it->second;
}

std::map<std::string, TensorInfo> read_safetensors_index(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / "model.safetensors.index.json";
    const fs::path single = fs::path(path) / "model.safetensors";
    if (fs::exists(index, ec)) return read_sharded(index.string());
    if (fs::exists(single, ec)) return read_safetensors_index(single.string());
    throw UsageError("folder " + path + " has neither model.safetensors nor model.safetensors.index.json");
  }
  if (!fs::exists(path, ec)) throw UsageError("no such safetensors file or folder: " + path);
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return read_sharded(path);
  std::map<std::string, TensorInfo> result;
  for (TensorInfo& t : read_file_header(path)) result[t.name] = std::move(t);
  return result;
}

torch::Tensor read_tensor(const TensorInfo& info) {
  return read_bytes_into(info, info.shape, info.data_begin, info.data_end - info.data_begin);
}

torch::Tensor read_tensor_rows(const TensorInfo& info, int64_t row_begin, int64_t row_end) {
  if (info.shape.empty())
    throw UsageError(info.file + ": tensor '" + info.name + "' is a scalar; it has no rows to read");
  if (row_begin < 0 || row_begin > row_end || row_end > info.shape[0])
    throw UsageError(info.file + ": tensor '" + info.name + "' of shape " + describe_shape(info.shape) +
                     " has no rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) + ")");
  // The header check guarantees bytes == rows x row_bytes, so these products cannot overflow.
  uint64_t row_bytes = safetensors_dtype_size(info.dtype);
  for (size_t d = 1; d < info.shape.size(); ++d) row_bytes *= static_cast<uint64_t>(info.shape[d]);
  std::vector<int64_t> shape = info.shape;
  shape[0] = row_end - row_begin;
  return read_bytes_into(info, shape, info.data_begin + static_cast<uint64_t>(row_begin) * row_bytes,
                         static_cast<uint64_t>(row_end - row_begin) * row_bytes);
}

torch::Tensor read_tensor_columns(const TensorInfo& info, int64_t col_begin, int64_t col_end) {
  if (info.shape.size() != 2)
    throw UsageError(info.file + ": tensor '" + info.name + "' of shape " + describe_shape(info.shape) +
                     " is not a matrix; columns can only be read from one");
  const int64_t rows = info.shape[0], cols = info.shape[1];
  if (col_begin < 0 || col_begin > col_end || col_end > cols)
    throw UsageError(info.file + ": tensor '" + info.name + "' of shape " + describe_shape(info.shape) +
                     " has no columns [" + std::to_string(col_begin) + ", " + std::to_string(col_end) + ")");
  torch::Tensor out = torch::empty({rows, col_end - col_begin}, torch::TensorOptions().dtype(torch_dtype(info.dtype)));
  if (out.numel() == 0) return out;
  // One read per row of the slice; each is a contiguous byte range of the file.
  Fd fd(info.file, O_RDONLY);
  if (fd.get() < 0) throw UsageError("cannot open " + info.file + ": " + os_error());
  const uint64_t esize = safetensors_dtype_size(info.dtype);
  const uint64_t width = static_cast<uint64_t>(col_end - col_begin) * esize;
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t offset = info.data_begin + (static_cast<uint64_t>(r) * cols + col_begin) * esize;
    if (!pread_all(fd.get(), dst + r * width, width, offset))
      throw UsageError(info.file + ": tensor '" + info.name + "' cannot be read (file truncated or unreadable: " +
                       os_error() + ")");
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> contiguous;
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      throw std::invalid_argument("write_safetensors " + path + ": tensor name '" + name + "' is reserved or repeated");
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", safetensors_dtype(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(t));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  std::string tmp = path + ".tmp.XXXXXX";
  int raw_fd = ::mkstemp(tmp.data());
  if (raw_fd < 0) throw std::runtime_error("cannot create a temporary file next to " + path + ": " + os_error());
  try {
    write_all(raw_fd, length, 8, tmp);
    write_all(raw_fd, text.data(), text.size(), tmp);
    for (const torch::Tensor& t : contiguous)
      write_all(raw_fd, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size(), tmp);
    ::fchmod(raw_fd, 0644);
    if (::fsync(raw_fd) != 0) throw std::runtime_error("cannot flush " + tmp + ": " + os_error());
  } catch (...) {
    ::close(raw_fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(raw_fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = os_error();
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot move " + tmp + " onto " + path + ": " + error);
  }
  // Make the rename itself durable.
  Fd dir(target.has_parent_path() ? target.parent_path().string() : ".", O_RDONLY | O_DIRECTORY);
  if (dir.get() >= 0) ::fsync(dir.get());
}

}  // namespace ddx::models
