#include "bandwidth/types.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace ddx::bw {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const char* name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllToAll: return "alltoall";
    case Collective::SendRecv: return "sendrecv";
  }
  return "?";
}

const char* name(DataType t) {
  switch (t) {
    case DataType::Int8: return "int8";
    case DataType::Uint8: return "uint8";
    case DataType::Int32: return "int32";
    case DataType::Uint32: return "uint32";
    case DataType::Int64: return "int64";
    case DataType::Uint64: return "uint64";
    case DataType::Half: return "half";
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::BFloat16: return "bfloat16";
  }
  return "?";
}

const char* name(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Min: return "min";
    case RedOp::Max: return "max";
    case RedOp::Avg: return "avg";
    case RedOp::None: return "none";
  }
  return "?";
}

std::string perf_name(Collective c) { return std::string(name(c)) + "_perf"; }

size_t element_size(DataType t) {
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8: return 1;
    case DataType::Half:
    case DataType::BFloat16: return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float: return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Double: return 8;
  }
  return 1;
}

bool is_floating(DataType t) {
  return t == DataType::Half || t == DataType::Float || t == DataType::Double ||
         t == DataType::BFloat16;
}

std::optional<Collective> parse_collective(const std::string& text) {
  static const std::map<std::string, Collective> names = {
      {"all_reduce", Collective::AllReduce},         {"allreduce", Collective::AllReduce},
      {"all_gather", Collective::AllGather},         {"allgather", Collective::AllGather},
      {"reduce_scatter", Collective::ReduceScatter}, {"reducescatter", Collective::ReduceScatter},
      {"broadcast", Collective::Broadcast},          {"bcast", Collective::Broadcast},
      {"reduce", Collective::Reduce},                {"alltoall", Collective::AllToAll},
      {"all_to_all", Collective::AllToAll},          {"sendrecv", Collective::SendRecv},
      {"send_recv", Collective::SendRecv}};
  auto it = names.find(lower(text));
  if (it == names.end()) return std::nullopt;
  return it->second;
}

std::optional<DataType> parse_datatype(const std::string& text) {
  static const std::map<std::string, DataType> names = {
      {"int8", DataType::Int8},         {"char", DataType::Int8},
      {"uint8", DataType::Uint8},       {"int32", DataType::Int32},
      {"int", DataType::Int32},         {"uint32", DataType::Uint32},
      {"int64", DataType::Int64},       {"uint64", DataType::Uint64},
      {"half", DataType::Half},         {"float16", DataType::Half},
      {"fp16", DataType::Half},         {"float", DataType::Float},
      {"float32", DataType::Float},     {"fp32", DataType::Float},
      {"double", DataType::Double},     {"float64", DataType::Double},
      {"fp64", DataType::Double},       {"bfloat16", DataType::BFloat16},
      {"bf16", DataType::BFloat16}};
  auto it = names.find(lower(text));
  if (it == names.end()) return std::nullopt;
  return it->second;
}

std::optional<RedOp> parse_redop(const std::string& text) {
  static const std::map<std::string, RedOp> names = {{"sum", RedOp::Sum}, {"prod", RedOp::Prod},
                                                     {"min", RedOp::Min}, {"max", RedOp::Max},
                                                     {"avg", RedOp::Avg}};
  auto it = names.find(lower(text));
  if (it == names.end()) return std::nullopt;
  return it->second;
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> v = {Collective::AllReduce, Collective::AllGather,
                                            Collective::ReduceScatter, Collective::Broadcast,
                                            Collective::Reduce, Collective::AllToAll,
                                            Collective::SendRecv};
  return v;
}

const std::vector<DataType>& all_datatypes() {
  static const std::vector<DataType> v = {DataType::Int8,  DataType::Uint8,  DataType::Int32,
                                          DataType::Uint32, DataType::Int64, DataType::Uint64,
                                          DataType::Half,  DataType::Float,  DataType::Double,
                                          DataType::BFloat16};
  return v;
}

const std::vector<RedOp>& all_redops() {
  static const std::vector<RedOp> v = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
  return v;
}

const char* record_name(Collective c, bool send_side) {
  if (c == Collective::SendRecv) return send_side ? "send" : "recv";
  return c == Collective::AllToAll ? "all_to_all" : name(c);  // the rest are spelled alike
}

}  // namespace ddx::bw
