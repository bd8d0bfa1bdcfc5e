// hg-train's outputs besides the checkpoint: metrics.jsonl (one JSON object a
// line, one line an epoch) and curves.svg (train/test loss and test accuracy
// against the epoch), drawn by hand — no plotting library.
#pragma once

#include <string>
#include <vector>

namespace hg::train {

struct EpochRecord {
  int epoch = 0;               // 1-based
  long long step = 0;          // optimizer steps after this epoch
  double lr = 0.0;             // learning rate of the epoch's last step
  double train_loss = 0.0;     // mean of the epoch's batch losses
  double test_loss = 0.0;
  double test_accuracy = 0.0;  // in [0, 1]
  double seconds = 0.0;        // training time of the epoch (without evaluation)
  double samples_per_second = 0.0;
};

// Reads the records of an earlier run (missing file: none). Lines that do not
// parse are an hg::Error naming the file and line.
std::vector<EpochRecord> read_metrics(const std::string& path);
// Rewrites `path` with exactly `records` (atomically: temp file + rename).
void write_metrics(const std::string& path, const std::vector<EpochRecord>& records);
// The SVG document for `records` (two panels: losses, accuracy).
std::string curves_svg(const std::vector<EpochRecord>& records, const std::string& title);
// Writes curves_svg() to `path` atomically.
void write_curves(const std::string& path, const std::vector<EpochRecord>& records, const std::string& title);

}  // namespace hg::train
