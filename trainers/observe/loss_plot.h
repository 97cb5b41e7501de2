#pragma once
// The loss curve of a run as an SVG, drawn from its metrics JSONL: loss per step (and the
// learning rate in a second panel).
#include <string>

namespace ddx::train {

// Writes `svg_path` from `metrics_path`; a metrics file with no records writes nothing.
void write_loss_plot(const std::string& metrics_path, const std::string& svg_path, const std::string& title);

}  // namespace ddx::train
