#pragma once
// The interactive view of `ddx top` (ncurses): the screen redrawn every poll, alarms in red,
// flagged ranks highlighted; keys q (quit), s (next sort column), r (reverse order).
#include <chrono>
#include <functional>

#include "top/top_model.h"

namespace ddx::top {

// Calls `refresh` every `poll` and draws what it returns until the user quits. Returns 0.
int run_tui(const std::function<Screen()>& refresh, std::chrono::milliseconds poll);

}  // namespace ddx::top
