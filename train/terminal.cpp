#include "train/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace hg::train {

std::string bar(double fraction, int cells) {
  fraction = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const int filled = static_cast<int>(std::floor(fraction * cells + 1e-9));
  return "[" + std::string(filled, '#') + std::string(cells - filled, '.') + "]";
}

std::string clock_time(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long long s = std::llround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

std::string short_count(double n) {
  char buf[32];
  if (!std::isfinite(n)) return "?";
  if (n < 1e4) {
    std::snprintf(buf, sizeof buf, "%.0f", n);
  } else if (n < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  }
  return buf;
}

std::string decimal(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string scale_text(double s) {
  int e = 0;
  const double m = std::frexp(s, &e);
  char buf[32];
  if (m == 0.5) {
    std::snprintf(buf, sizeof buf, "2^%d", e - 1);
  } else {
    std::snprintf(buf, sizeof buf, "%g", s);
  }
  return buf;
}

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string without_program_prefix(const std::string& message, const std::string& program) {
  const std::string prefix = program + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

std::string fit_line(const std::vector<Piece>& pieces, int columns) {
  std::vector<Piece> p = pieces;
  const size_t limit = columns > 0 ? static_cast<size_t>(columns - 1) : SIZE_MAX;
  for (;;) {
    // Length without the bar's cells; a bar is "[" cells "]" joined by single spaces.
    size_t fixed = 0;
    bool has_bar = false;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].bar) {
        has_bar = true;
        fixed += 2;
      } else {
        fixed += p[i].text.size();
      }
      if (i == 0) continue;
      fixed += (p[i].bar || p[i - 1].bar) ? 1 : 2;
    }
    int cells = 0;
    bool fits = fixed <= limit;
    if (has_bar) {
      cells = limit == SIZE_MAX ? Terminal::kMaxBar
                                : static_cast<int>(std::min<size_t>(limit >= fixed ? limit - fixed : 0,
                                                                    static_cast<size_t>(Terminal::kMaxBar)));
      fits = fits && cells >= Terminal::kMinBar;
    }
    if (fits) {
      std::string out;
      for (size_t i = 0; i < p.size(); ++i) {
        if (i > 0) out += (p[i].bar || p[i - 1].bar) ? " " : "  ";
        out += p[i].bar ? bar(p[i].fraction, cells) : p[i].text;
      }
      return out;
    }
    // Drop the most droppable piece (the last of equals); none left: cut.
    int worst = -1;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].drop > 0 && (worst < 0 || p[i].drop >= p[static_cast<size_t>(worst)].drop)) worst = static_cast<int>(i);
    }
    if (worst < 0) {
      std::string out;
      for (size_t i = 0; i < p.size(); ++i) {
        if (p[i].bar) continue;
        if (!out.empty()) out += "  ";
        out += p[i].text;
      }
      return out.substr(0, limit);
    }
    p.erase(p.begin() + worst);
  }
}

Terminal::Terminal() {
  tty_ = ::isatty(STDOUT_FILENO) != 0;
  const char* term = std::getenv("TERM");
  ansi_ = tty_ && term != nullptr && std::strcmp(term, "dumb") != 0;
}

int Terminal::columns() const {
  winsize ws{};
  if (tty_ && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long n = std::strtol(c, &end, 10);
    if (end != c && *end == '\0' && n >= 20 && n <= 10000) return static_cast<int>(n);
  }
  return 80;  // the classic terminal, and what a log viewer shows without wrapping
}

void Terminal::write_over(const std::string& text) {
  std::string out = "\r" + text;
  if (ansi_) {
    out += "\033[K";
  } else if (text.size() < last_len_) {
    out += std::string(last_len_ - text.size(), ' ');
  }
  std::fputs(out.c_str(), stdout);
}

void Terminal::progress(const std::string& line) {
  if (!tty_) return;
  write_over(line);
  std::fflush(stdout);
  open_ = true;
  last_len_ = line.size();
}

void Terminal::line(const std::string& text) {
  if (open_) {
    write_over(text);
    std::fputs("\n", stdout);
  } else {
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
  open_ = false;
  last_len_ = 0;
}

void Terminal::end_progress() {
  if (!open_) return;
  std::fputs("\n", stdout);
  std::fflush(stdout);
  open_ = false;
  last_len_ = 0;
}

void Terminal::paragraph(const std::string& text, int indent) {
  const int width = columns();
  if (width <= 0 || static_cast<int>(text.size()) < width) {
    line(text);
    return;
  }
  const size_t limit = static_cast<size_t>(std::max(width - 1, 20));
  std::string out, current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (!current.empty() && current.size() + 1 + word.size() > limit) {
      out += current + "\n";
      current = std::string(static_cast<size_t>(indent), ' ');
    } else if (!current.empty()) {
      current += ' ';
    }
    // A word wider than a line (a long path) is cut across lines.
    while (current.size() + word.size() > limit) {
      const size_t room = limit - current.size();
      out += current + word.substr(0, room) + "\n";
      word.erase(0, room);
      current = std::string(static_cast<size_t>(indent), ' ');
    }
    current += word;
  }
  out += current;
  line(out);
}

}  // namespace hg::train
