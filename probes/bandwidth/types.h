#pragma once
// The vocabulary of `ddx probe bandwidth`: collectives, data types and reduction ops, named as
// nccl-tests names them so users can type the same flags and read the same table.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ddx::bw {

enum class Collective { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };
enum class DataType { Int8, Uint8, Int32, Uint32, Int64, Uint64, Half, Float, Double, BFloat16 };
// None: the collective does not reduce (the table's redop column says "none").
enum class RedOp { Sum, Prod, Min, Max, Avg, None };

const char* name(Collective c);  // "all_reduce", "all_gather", ..., "alltoall", "sendrecv"
const char* name(DataType t);    // "int8", ..., "half", "float", "double", "bfloat16"
const char* name(RedOp op);      // "sum", "prod", "min", "max", "avg", "none"
// The collective layer's record name of the op (all_reduce, ..., send, recv), the name fault
// specs use (op=...): a sendrecv sends (send_side) and writes a recv's result.
const char* record_name(Collective c, bool send_side);

// "all_reduce_perf": the nccl-tests binary the collective corresponds to.
std::string perf_name(Collective c);

size_t element_size(DataType t);
bool is_floating(DataType t);

// Names and common aliases ("allreduce", "float32", "fp16", "bf16", ...); nullopt when unknown.
std::optional<Collective> parse_collective(const std::string& text);
std::optional<DataType> parse_datatype(const std::string& text);
std::optional<RedOp> parse_redop(const std::string& text);

const std::vector<Collective>& all_collectives();
const std::vector<DataType>& all_datatypes();
const std::vector<RedOp>& all_redops();  // without None

}  // namespace ddx::bw
