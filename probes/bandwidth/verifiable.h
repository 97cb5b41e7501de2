#pragma once
// Data whose correct result is known exactly (the `#wrong` column). Every input element is a
// small integer chosen so that any reduction order gives the same bits: sums stay below the
// largest integer the type holds exactly (2048 for half, 256 for bfloat16), products are 1 or
// 2, integer types wrap the same way on every engine. Only floating-point `avg` is compared
// with a tolerance (2 ULP, as nccl-tests does), because engines divide in different precisions.
#include <cstddef>
#include <cstdint>

#include "bandwidth/collective.h"
#include "bandwidth/types.h"

namespace ddx::bw {

struct DataPattern {
  DataType type = DataType::Float;
  RedOp op = RedOp::Sum;
  int nranks = 1;
  int rep = 0;  // a different pattern per check iteration, so stale results do not pass
};

// Input values are taken modulo this (>= 1): 13, or less when n ranks' sum must stay exact.
int64_t value_modulus(const DataPattern& p);

// The value rank `rank` contributes at input element `index`.
int64_t input_value(const DataPattern& p, int rank, size_t index);

// The exact value of output element with this source (before conversion to the type).
double expected_value(const DataPattern& p, const Source& s);

// Writes rank `rank`'s input elements [0, count) into `buffer` (elements of p.type).
void fill_input(const DataPattern& p, int rank, size_t count, void* buffer);

// Element `i` of a typed buffer as a double; a double stored into the type and read back
// (integers wrap, floating point rounds to nearest even).
double load_element(DataType t, const void* buffer, size_t i);
void store_element(DataType t, void* buffer, size_t i, double value);
double round_trip(DataType t, double value);
// Adds 1 to element 0 (nothing when count is 0): what an injected corrupt-collective does.
void add_one_to_first(DataType t, void* buffer, size_t count);

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);

struct CheckOutcome {
  int64_t wrong = 0;        // elements that differ from the exact result
  int64_t first = -1;       // first wrong element
  double got = 0, expected = 0;
};

// Compares this rank's output (g.recv_count elements of p.type) with the exact result.
CheckOutcome check_output(const CollectiveDef& def, const Geometry& g, const DataPattern& p,
                          int rank, int root, const void* output);

// The same for one point-to-point receive of `count` elements from `peer`.
CheckOutcome check_received(const DataPattern& p, int peer, size_t count, const void* output);

}  // namespace ddx::bw
