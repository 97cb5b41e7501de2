#include "top/tui.h"

#include <curses.h>

#include <clocale>
#include <string>

#include "top/top_render.h"

namespace ddx::top {
namespace {

// The first `columns` characters of UTF-8 `text` (every character here is one column wide).
std::string clip(const std::string& text, int columns) {
  int seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == columns) return text.substr(0, i);
  }
  return text;
}

void draw(const Screen& screen, SortKey sort, bool descending, std::chrono::milliseconds poll) {
  erase();
  int y = 0;
  for (const Line& line : render_screen(screen, sort, descending)) {
    if (y >= LINES - 1) break;
    attr_t attr = A_NORMAL;
    switch (line.style) {
      case Style::Title: attr = A_BOLD; break;
      case Style::Header: attr = A_REVERSE; break;
      case Style::Alarm: attr = A_BOLD | (has_colors() ? COLOR_PAIR(1) : A_STANDOUT); break;
      case Style::Flagged: attr = A_BOLD | (has_colors() ? COLOR_PAIR(2) : A_STANDOUT); break;
      case Style::Note: attr = A_DIM; break;
      case Style::Normal: break;
    }
    attron(attr);
    mvaddstr(y++, 0, clip(line.text, COLS).c_str());
    attroff(attr);
  }
  const std::string keys = "q quit  s sort: " + std::string(sort_name(sort)) + (descending ? " (descending)" : "") +
                           "  r reverse  refresh every " + std::to_string(poll.count()) + " ms";
  attron(A_REVERSE);
  mvaddstr(LINES - 1, 0, clip(keys, COLS).c_str());
  attroff(A_REVERSE);
  refresh();
}

}  // namespace

int run_tui(const std::function<Screen()>& refresh_screen, std::chrono::milliseconds poll) {
  std::setlocale(LC_ALL, "");
  initscr();
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  if (has_colors()) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_RED, -1);
    init_pair(2, COLOR_YELLOW, -1);
  }
  SortKey sort = SortKey::Rank;
  bool descending = false;
  bool quit = false;
  while (!quit) {
    const auto next = std::chrono::steady_clock::now() + poll;
    const Screen screen = refresh_screen();
    draw(screen, sort, descending, poll);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      timeout(static_cast<int>(left.count()));
      const int key = getch();
      if (key == 'q' || key == 'Q') {
        quit = true;
        break;
      }
      if (key == 's') sort = next_sort(sort);
      if (key == 'r') descending = !descending;
      if (key == 's' || key == 'r' || key == KEY_RESIZE) draw(screen, sort, descending, poll);
    }
  }
  endwin();
  return 0;
}

}  // namespace ddx::top
