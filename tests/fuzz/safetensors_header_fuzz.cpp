// libFuzzer target for the safetensors header parser: any input must either parse into a
// header that tiles the file exactly or be refused with UsageError. Anything else (another
// exception, a crash, a sanitizer report) is a bug. Built with -DDDX_FUZZ=ON under clang:
//   build/tests/safetensors_header_fuzz tests/fuzz/corpus/safetensors_header
// safetensors_header_test runs the same entry point over the corpus in every CI build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "ddx/errors.h"
#include "models/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = ddx::models::parse_safetensors_header(data, size, size, "fuzz-input");
    // Accepted: every tensor lies inside the input, after the header.
    for (const auto& t : header.tensors)
      if (t.data_begin < 8 + header.header_bytes || t.data_end < t.data_begin || t.data_end > size) std::abort();
  } catch (const ddx::UsageError&) {
    // Refused with a message: the expected outcome for malformed input.
  }
  return 0;
}
