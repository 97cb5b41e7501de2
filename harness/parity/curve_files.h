#pragma once
// Loss curves from the files other tools write, for `ddx compare`: ddx's metrics.jsonl, any JSON
// lines with a named key (PyTorch or Lightning loggers, torchtitan), and CSV with a named column
// (TensorBoard's export, W&B's, a spreadsheet). Steps come from a step field or column when
// there is one, else from the line or row number (1, 2, ...).
#include <string>
#include <vector>

#include "ddx/curve_diff.h"

namespace ddx::parity {

struct CurveSource {
  std::string path;
  std::string format = "auto";   // auto (by extension, else by the first character), jsonl, csv
  std::string key = "loss";      // JSON key or CSV column of the values
  std::string step_key = "step"; // JSON key or CSV column of the step numbers, when present
};

// Throws UsageError naming the file (and line) when it is unreadable, holds no value under
// `key`, or a value is not a number.
std::vector<CurvePoint> read_curve_file(const CurveSource& source);

}  // namespace ddx::parity
