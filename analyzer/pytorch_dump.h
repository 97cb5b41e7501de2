#pragma once
// PyTorch's own flight-recorder dumps (ProcessGroupNCCL, and ProcessGroupGloo with
// TORCH_FR_BUFFER_SIZE set), read into the analyzer's model, so the analysis that names the
// culprit of a ddx job's hang does the same for a torchrun job's. The layout is PyTorch's
// (torch/csrc/distributed/c10d/FlightRecorder*.{hpp,cpp}; its reader is
// torch/distributed/flight_recorder/): format versions 2.x, keys added over releases, each
// read where present. docs/analyze-pytorch.md lists what is read and how.
#include <cstdint>
#include <string>

#include "analyzer/dump_value.h"
#include "analyzer/trace_model.h"

namespace ddx::analyze {

// True for a document with PyTorch's top-level keys (a "version" string and "entries").
bool is_pytorch_dump(const DumpValue& doc);

// One rank's dump, a pickle read in place (pickle_value.h) or JSON (json_value). `rank` comes from the
// file name (PyTorch records no global rank); `file_time_us` (the file's modification time, unix)
// stands in for the dump's own time, which PyTorch does not record either. Throws
// std::runtime_error naming what is wrong.
RankDump read_pytorch_dump(const DumpValue& doc, int rank, const std::string& path, int64_t file_time_us);

// What one dump cannot say, from all of them; call once with every dump read. Gloo's recorder
// lists no members for its groups (pg_config is {"": {"ranks": "[]"}}): a group's members are the
// ranks whose dumps know it, by its status or its entries. Nor does it record whether a
// collective completed: one that some member got past did.
void finish_pytorch_dumps(TraceSet& traces);

}  // namespace ddx::analyze
