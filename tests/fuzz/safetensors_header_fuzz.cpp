// libFuzzer target for the safetensors header parser: any input must either parse into a
// header that tiles the file exactly or be refused with UsageError. Anything else (another
// exception, a crash, a sanitizer report) is a bug. Built with -DDDX_FUZZ=ON under clang:
//   build/tests/safetensors_header_fuzz tests/fuzz/corpus/safetensors_header
// safetensors_header_test runs the same entry point over the corpus in every CI build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "ddx/errors/errors.h"
#include "models/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = ddx::models::parse_safetensors_header(data, size, size, "fuzz-input");
    // Accepted: the tensors, in offset order, tile the data section exactly, from the first
    // byte after the header to the end of the input: no overlap, no gap, nothing after.
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& t : header.tensors) spans.emplace_back(t.data_begin, t.data_end);
    std::sort(spans.begin(), spans.end());
    uint64_t next = 8 + header.header_bytes;
    for (const auto& [begin, end] : spans) {
      if (begin != next || end < begin) std::abort();
      next = end;
    }
    if (next != size) std::abort();
  } catch (const ddx::UsageError&) {
    // Refused with a message: the expected outcome for malformed input.
  }
  return 0;
}
