// hg-train's outputs besides the checkpoint: metrics.jsonl (one JSON object a
// line: a "step" record every ~1% of an epoch, an "epoch" record at the end of
// each epoch; an iteration-based run (--model gpt) writes "step" records and
// an "eval" record every evaluation) and curves.svg (losses, test accuracy and, with a loss scaler,
// the loss scale against the epoch), drawn by hand — no plotting library.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace hg::train {

struct EpochRecord {
  int epoch = 0;            // 1-based
  long long step = 0;       // optimizer steps after this epoch
  double lr = 0.0;          // learning rate of the epoch's last step
  double train_loss = 0.0;  // mean of the epoch's batch losses
  double test_loss = 0.0;
  double test_accuracy = 0.0;  // in [0, 1]
  double seconds = 0.0;        // training time of the epoch (without evaluation)
  double samples_per_second = 0.0;
  // With a loss scaler (AMP and the 16-bit modes), else NaN and 0.
  double loss_scale = NAN;      // at the end of the epoch
  long long steps_skipped = 0;  // steps of this epoch skipped on overflow
  bool has_scaler() const { return !std::isnan(loss_scale); }
};

// A point of the sub-epoch training curve.
struct StepRecord {
  long long step = 0;           // optimizer steps so far (iterations, skipped ones included)
  double epoch = 0.0;           // epochs done, fractional: 2.25 = a quarter into the third
  double train_loss = 0.0;      // mean of the batch losses since the previous point
  double lr = 0.0;              // learning rate of the last step
  double loss_scale = NAN;      // after the last step (NaN: no scaler)
  long long steps_skipped = 0;  // skipped steps in the whole run so far
};

// An evaluation of an iteration-based run (hg-train --model gpt): the
// validation loss on fixed windows every --eval-every steps.
struct EvalRecord {
  long long step = 0;         // optimizer steps before the evaluation
  double lr = 0.0;            // learning rate of the last step
  double train_loss = 0.0;    // mean of the batch losses since the previous evaluation
  double val_loss = 0.0;      // mean cross-entropy over the validation windows
  double val_accuracy = 0.0;  // share of validation tokens whose most likely next token is right
  double seconds = 0.0;       // training time since the previous evaluation (without evaluating)
  double tokens_per_second = 0.0;
  double loss_scale = NAN;      // with a loss scaler, else NaN
  long long steps_skipped = 0;  // skipped steps in the whole run so far
  bool has_scaler() const { return !std::isnan(loss_scale); }
};

struct Metrics {
  std::vector<EpochRecord> epochs;
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;  // iteration-based runs; curves are then drawn against the step
};

// Reads the records of an earlier run (missing file: none). A line without
// "type" is an epoch record (files of earlier versions). Lines that do not
// parse are an hg::Error naming the file and line.
Metrics read_metrics(const std::string& path);
// Rewrites `path` with exactly `metrics`, ordered by step (each epoch or eval
// record after the step records up to its step), atomically: temp file + rename.
void write_metrics(const std::string& path, const Metrics& metrics);
// The SVG document: panels for the losses (sub-epoch train loss, per-epoch
// train and test loss), the test accuracy and, when the records carry a loss
// scale, the scale on a log2 axis with the skipped steps marked. With eval
// records the x axis is the step and the panels show the train and
// validation loss and the validation next-token accuracy.
std::string curves_svg(const Metrics& metrics, const std::string& title);
// Writes curves_svg() to `path` atomically.
void write_curves(const std::string& path, const Metrics& metrics, const std::string& title);

}  // namespace hg::train
