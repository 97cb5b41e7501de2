#include "bandwidth/verifiable.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ddx::bw {
namespace {

// The largest integer the type holds exactly (every smaller one too).
double exact_integer_limit(DataType t) {
  switch (t) {
    case DataType::Half: return 2048;
    case DataType::BFloat16: return 256;
    case DataType::Float: return 16777216;
    case DataType::Double: return 9007199254740992.0;
    default: return 1e300;  // integers wrap identically everywhere; no limit needed
  }
}

// Unit roundoff of the floating types, for avg's tolerance.
double epsilon(DataType t) {
  switch (t) {
    case DataType::Half: return std::ldexp(1.0, -10);
    case DataType::BFloat16: return std::ldexp(1.0, -7);
    case DataType::Float: return std::ldexp(1.0, -23);
    case DataType::Double: return std::ldexp(1.0, -52);
    default: return 0;
  }
}

template <typename T>
T load(const void* buffer, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buffer) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* buffer, size_t i, T v) {
  std::memcpy(static_cast<char*>(buffer) + i * sizeof(T), &v, sizeof(T));
}

// Integers are stored modulo 2^bits, the way every engine's integer sum wraps.
uint64_t wrap(double v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

}  // namespace

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xffu) == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: infinity
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);  // underflow: signed zero
    mant |= 0x800000u;                                  // subnormal: make the 1 explicit
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

double load_element(DataType t, const void* buffer, size_t i) {
  switch (t) {
    case DataType::Int8: return load<int8_t>(buffer, i);
    case DataType::Uint8: return load<uint8_t>(buffer, i);
    case DataType::Int32: return load<int32_t>(buffer, i);
    case DataType::Uint32: return load<uint32_t>(buffer, i);
    case DataType::Int64: return static_cast<double>(load<int64_t>(buffer, i));
    case DataType::Uint64: return static_cast<double>(load<uint64_t>(buffer, i));
    case DataType::Half: return half_to_float(load<uint16_t>(buffer, i));
    case DataType::Float: return load<float>(buffer, i);
    case DataType::Double: return load<double>(buffer, i);
    case DataType::BFloat16: return bfloat16_to_float(load<uint16_t>(buffer, i));
  }
  return 0;
}

void store_element(DataType t, void* buffer, size_t i, double v) {
  switch (t) {
    case DataType::Int8: store(buffer, i, static_cast<int8_t>(static_cast<uint8_t>(wrap(v)))); break;
    case DataType::Uint8: store(buffer, i, static_cast<uint8_t>(wrap(v))); break;
    case DataType::Int32: store(buffer, i, static_cast<int32_t>(static_cast<uint32_t>(wrap(v)))); break;
    case DataType::Uint32: store(buffer, i, static_cast<uint32_t>(wrap(v))); break;
    case DataType::Int64: store(buffer, i, static_cast<int64_t>(wrap(v))); break;
    case DataType::Uint64: store(buffer, i, wrap(v)); break;
    case DataType::Half: store(buffer, i, float_to_half(static_cast<float>(v))); break;
    case DataType::Float: store(buffer, i, static_cast<float>(v)); break;
    case DataType::Double: store(buffer, i, v); break;
    case DataType::BFloat16: store(buffer, i, float_to_bfloat16(static_cast<float>(v))); break;
  }
}

double round_trip(DataType t, double value) {
  unsigned char slot[8];
  store_element(t, slot, 0, value);
  return load_element(t, slot, 0);
}

int64_t value_modulus(const DataPattern& p) {
  if (p.op == RedOp::Prod) return 2;
  if (p.op != RedOp::Sum && p.op != RedOp::Avg) return 13;
  // n ranks' values below m sum to at most (m - 1) n, which must stay exact.
  const double limit = exact_integer_limit(p.type);
  const double per_rank = std::floor(limit / p.nranks);
  return static_cast<int64_t>(std::min(13.0, per_rank + 1));
}

int64_t input_value(const DataPattern& p, int rank, size_t index) {
  if (p.op == RedOp::Prod) {
    // At most one rank contributes a 2 to each element: the product is 1 or 2 in any type.
    return (index + static_cast<size_t>(p.rep)) % static_cast<size_t>(p.nranks + 1) ==
                   static_cast<size_t>(rank)
               ? 2
               : 1;
  }
  const uint64_t m = static_cast<uint64_t>(value_modulus(p));
  return static_cast<int64_t>((index * 7 + static_cast<uint64_t>(rank) * 3 +
                               static_cast<uint64_t>(p.rep) * 5) % m);
}

double expected_value(const DataPattern& p, const Source& s) {
  if (!s.reduced) return static_cast<double>(input_value(p, s.rank, s.index));
  int64_t acc = input_value(p, 0, s.index);
  for (int q = 1; q < p.nranks; ++q) {
    const int64_t v = input_value(p, q, s.index);
    switch (p.op) {
      case RedOp::Prod: acc *= v; break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::Max: acc = std::max(acc, v); break;
      default: acc += v; break;
    }
  }
  if (p.op == RedOp::Avg) return static_cast<double>(acc) / p.nranks;
  return static_cast<double>(acc);
}

void fill_input(const DataPattern& p, int rank, size_t count, void* buffer) {
  for (size_t i = 0; i < count; ++i) {
    store_element(p.type, buffer, i, static_cast<double>(input_value(p, rank, i)));
  }
}

namespace {

bool matches(const DataPattern& p, double got, double expected) {
  if (p.op == RedOp::Avg && is_floating(p.type)) {
    return std::fabs(got - expected) <= 2 * epsilon(p.type) * std::max(std::fabs(expected), 1e-30);
  }
  return got == expected;
}

void note(CheckOutcome& out, size_t k, double got, double expected) {
  if (out.wrong++ == 0) {
    out.first = static_cast<int64_t>(k);
    out.got = got;
    out.expected = expected;
  }
}

}  // namespace

CheckOutcome check_output(const CollectiveDef& def, const Geometry& g, const DataPattern& p,
                          int rank, int root, const void* output) {
  CheckOutcome out;
  if (!def.has_output(rank, root)) return out;
  for (size_t k = 0; k < g.recv_count; ++k) {
    const double expected = round_trip(p.type, expected_value(p, def.source(g, rank, p.nranks, root, k)));
    const double got = load_element(p.type, output, k);
    if (!matches(p, got, expected)) note(out, k, got, expected);
  }
  return out;
}

CheckOutcome check_received(const DataPattern& p, int peer, size_t count, const void* output) {
  CheckOutcome out;
  for (size_t k = 0; k < count; ++k) {
    const double expected = round_trip(p.type, static_cast<double>(input_value(p, peer, k)));
    const double got = load_element(p.type, output, k);
    if (got != expected) note(out, k, got, expected);
  }
  return out;
}

void add_one_to_first(DataType t, void* buffer, size_t count) {
  if (count > 0) store_element(t, buffer, 0, load_element(t, buffer, 0) + 1);
}

}  // namespace ddx::bw
