#pragma once
// How a Screen is drawn: lines of text with a style each (the TUI maps styles to colours, the
// plain output prints the text), and the JSON object `--json` prints per refresh. No LibTorch.
#include <string>
#include <vector>

#include "top/top_model.h"

namespace ddx::top {

enum class Style { Normal, Title, Header, Alarm, Flagged, Note };
struct Line {
  std::string text;
  Style style = Style::Normal;
};

// Columns the rank table can be sorted by (the TUI's 's' key cycles them).
enum class SortKey { Rank, Step, TokensPerS, ComputeMs, HeartbeatAge };
const char* sort_name(SortKey key);
SortKey next_sort(SortKey key);

// Header, nodes, ranks (sorted; flagged ranks first when `flagged_first`), then the alarms.
std::vector<Line> render_screen(const Screen& screen, SortKey sort, bool descending);

// "▁▂▅█" scaled to `max` (values <= 0 are the lowest bar), the last `width` values.
std::string sparkline(const std::vector<double>& values, double max, size_t width);

// One line of JSON (no newline).
std::string screen_json(const Screen& screen);

}  // namespace ddx::top
