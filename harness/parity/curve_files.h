#pragma once
// Loss curves from the files other tools write, for `ddx compare`: ddx's metrics.jsonl, any JSON
// lines with a named key (PyTorch or Lightning loggers, torchtitan), and CSV with a named column
// (TensorBoard's export, W&B's, a spreadsheet). Steps come from a step field or column when
// there is one, else from the line or row number (1, 2, ...); a step key the user named must be
// there.
#include <string>
#include <vector>

#include "harness/parity/curve_diff.h"

namespace ddx::parity {

struct CurveSource {
  std::string path;
  std::string format = "auto";   // auto (by extension, else by the first character), jsonl, csv
  std::string key = "loss";      // JSON key or CSV column of the values
  std::string step_key = "step"; // JSON key or CSV column of the step numbers, when present
  bool step_key_named = false;   // the user named step_key: a file without it is an error, not row numbers
};

struct CurveFile {
  std::vector<CurvePoint> points;
  bool steps_are_rows = false;  // no value came with a step: the steps are the records' positions
};

// Throws UsageError naming the file (and line) when it is unreadable, holds no value under
// `key`, a value is not a number, or a named step key is in no record (no column) of it.
CurveFile read_curve_file(const CurveSource& source);

}  // namespace ddx::parity
