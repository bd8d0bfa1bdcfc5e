// hg-train's terminal output: a progress line that updates in place and fits
// the terminal's width (TIOCGWINSZ, read at every update so a resize is
// followed), and plain lines when stdout is not a terminal (a pipe, a file,
// CI logs), where nothing is overwritten; those lines fit $COLUMNS, else 80
// columns, too (the least important pieces are left out first).
#pragma once

#include <string>
#include <vector>

namespace hg::train {

// One piece of a status line. Pieces are dropped, highest `drop` first (0:
// never), until the line fits; a bar takes the room that is left (between
// kMinBar and kMaxBar cells) or is dropped like any other piece.
struct Piece {
  std::string text;
  int drop = 0;
  bool bar = false;
  double fraction = 0.0;  // a bar's filled part, in [0, 1]
};

// The pieces joined by two spaces (a bar by one on each side), fitted into
// `columns` (0: no limit; a bar then gets kMaxBar cells). Never longer than
// `columns` - 1: writing the last column makes some terminals wrap.
std::string fit_line(const std::vector<Piece>& pieces, int columns);

// "[#####.....]" with `cells` cells between the brackets.
std::string bar(double fraction, int cells);
// 75 -> "1:15", 3725 -> "1:02:05"; negative or non-finite -> "--:--".
std::string clock_time(double seconds);
// 41203 -> "41.2k"; below 10000 as an integer.
std::string short_count(double n);
// The shortest decimal that reads back as `v` (0.002, not 0x1.0624dd2f1a9fcp-9).
std::string decimal(double v);
// 65536 -> "2^16"; other values as %g.
std::string scale_text(double s);
// printf-style formatting of one number: fixed("loss %.4f", 0.5).
std::string fixed(const char* format, double v);
// A message without a leading "<program>: " (the programs add their own
// prefix; messages of the library's writers may carry it already).
std::string without_program_prefix(const std::string& message, const std::string& program);

class Terminal {
 public:
  Terminal();
  bool tty() const { return tty_; }
  // The width to fit lines into: on a tty the terminal's columns
  // (TIOCGWINSZ, else $COLUMNS, else 80); otherwise $COLUMNS, else 80.
  int columns() const;
  // Replaces the progress line (a tty only; elsewhere it does nothing).
  void progress(const std::string& line);
  // Prints a finished line: over the progress line on a tty (which it
  // clears), else as a new line.
  void line(const std::string& text);
  // Ends an open progress line (before a message on stderr, say).
  void end_progress();
  // Prints `text` word-wrapped to the width (continuation lines indented by
  // `indent` spaces).
  void paragraph(const std::string& text, int indent = 2);

  static constexpr int kMinBar = 10;
  static constexpr int kMaxBar = 30;

 private:
  void write_over(const std::string& text);
  bool tty_ = false;
  bool ansi_ = false;    // "\033[K" clears to the end of the line
  bool open_ = false;    // a progress line is on screen
  size_t last_len_ = 0;  // its length (padding when there is no ANSI)
};

}  // namespace hg::train
