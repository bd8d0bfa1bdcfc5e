#include "train/report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace hg::train {
namespace {

// Writes `text` to `path` atomically, so a reader (or a killed run) never sees half a file.
void write_atomically(const std::string& path, const std::string& text) {
  AtomicFile out(path, "hg-train");
  out.write(text);
  out.commit();
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `span`.
double nice_step(double span, int n) {
  const double raw = span / std::max(n, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10.0 * p;
}

struct Point {
  double x, y;
};

// What a panel draws: a polyline (optionally as steps) and/or markers.
struct Series {
  std::string name, color;
  std::vector<Point> points;
  bool line = true;
  bool markers = false;
  bool steps = false;  // horizontal, then vertical (a value held until it changes)
  double width = 2.0;
  bool triangles = false;  // downward triangles at the top of the frame (events)
};

enum class YAxis { kLinear, kLog2 };

// One panel: the frame at (x0, y0) of size (w, h); data mapped inside it
// with a margin, so markers never cross the frame; the legend below the x
// label, one entry a row.
void panel(std::ostringstream& svg, double x0, double y0, double w, double h, const std::string& title,
           const std::string& y_label, double x_lo, double x_hi, const std::vector<Series>& series, double y_scale,
           YAxis y_axis, const std::string& x_label) {
  constexpr double kPad = 8.0;  // px between the frame and the data area
  auto yv = [&](double v) { return y_axis == YAxis::kLog2 ? std::log2(v) : v * y_scale; };
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    if (s.triangles) continue;
    for (const Point& p : s.points) {
      const double v = yv(p.y);
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = 0.0, hi = 1.0;
  double step = 1.0;
  if (y_axis == YAxis::kLog2) {
    lo = std::floor(lo) - (hi - lo < 1.0 ? 1.0 : 0.0);
    hi = std::ceil(hi) + (hi - lo < 2.0 ? 1.0 : 0.0);
    step = std::max(1.0, std::ceil((hi - lo) / 6.0));
  } else {
    if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
    step = nice_step(hi - lo, 5);
    lo = std::floor(lo / step) * step;
    hi = std::ceil(hi / step) * step;
  }
  auto px = [&](double x) { return x0 + kPad + (x - x_lo) / (x_hi - x_lo) * (w - 2 * kPad); };
  auto py = [&](double v) { return y0 + h - kPad - (v - lo) / (hi - lo) * (h - 2 * kPad); };

  svg << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 - 10 << "\" text-anchor=\"middle\" font-size=\"14\">" << title
      << "</text>\n";
  svg << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << h
      << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double v = lo; v <= hi + step / 2; v += step) {
    svg << "<line x1=\"" << x0 << "\" x2=\"" << x0 + w << "\" y1=\"" << py(v) << "\" y2=\"" << py(v)
        << "\" stroke=\"#ddd\"/>\n";
    const std::string label = y_axis == YAxis::kLog2 ? "2^" + format("%.0f", v)
                                                     : format(step < 0.1 ? "%.2f"
                                                              : step < 1 ? "%.1f"
                                                                         : "%.0f",
                                                              v);
    svg << "<text x=\"" << x0 - 6 << "\" y=\"" << py(v) + 4 << "\" text-anchor=\"end\" font-size=\"11\">" << label
        << "</text>\n";
  }
  const double x_step = nice_step(x_hi - x_lo, 8);
  for (double x = std::ceil(x_lo / x_step) * x_step; x <= x_hi + x_step / 1000; x += x_step) {
    svg << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << y0 + h << "\" y2=\"" << y0 + h + 4
        << "\" stroke=\"#444\"/>\n";
    svg << "<text x=\"" << px(x) << "\" y=\"" << y0 + h + 16 << "\" text-anchor=\"middle\" font-size=\"11\">"
        << format(x_step >= 1     ? "%.0f"
                  : x_step >= 0.1 ? "%.1f"
                                  : "%.2f",
                  x)
        << "</text>\n";
  }
  svg << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 + h + 32 << "\" text-anchor=\"middle\" font-size=\"12\">"
      << x_label << "</text>\n";
  svg << "<text transform=\"translate(" << x0 - 44 << "," << y0 + h / 2
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << y_label << "</text>\n";
  int row = 0;
  for (const Series& s : series) {
    std::vector<Point> pts;
    for (const Point& p : s.points) {
      if (std::isfinite(yv(p.y)) && std::isfinite(p.x)) pts.push_back({px(p.x), py(yv(p.y))});
    }
    if (s.triangles) {
      for (const Point& p : s.points) {
        const double cx = px(p.x), top = y0 + 2;
        svg << "<path d=\"M" << cx - 4 << "," << top << " L" << cx + 4 << "," << top << " L" << cx << "," << top + 7
            << " Z\" fill=\"" << s.color << "\"/>\n";
      }
    } else {
      if (s.line && pts.size() > 1) {
        svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"" << s.width << "\" points=\"";
        for (size_t i = 0; i < pts.size(); ++i) {
          if (s.steps && i > 0) svg << pts[i].x << "," << pts[i - 1].y << " ";
          svg << pts[i].x << "," << pts[i].y << " ";
        }
        svg << "\"/>\n";
      }
      if (s.markers || pts.size() == 1) {
        for (const Point& p : pts) {
          svg << "<circle cx=\"" << p.x << "\" cy=\"" << p.y << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
        }
      }
    }
    if (s.name.empty()) continue;
    const double ly = y0 + h + 50 + 15 * row++;
    svg << "<line x1=\"" << x0 << "\" x2=\"" << x0 + 20 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
        << "\" stroke=\"" << s.color << "\" stroke-width=\"" << (s.triangles ? 6 : s.width) << "\"/>\n";
    svg << "<text x=\"" << x0 + 26 << "\" y=\"" << ly << "\" font-size=\"11\">" << escape_xml(s.name) << "</text>\n";
  }
}

// NaN is written as null (JSON has no NaN) and read back as NaN.
double number(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  return v.is_null() ? std::nan("") : v.get<double>();
}

}  // namespace

Metrics read_metrics(const std::string& path) {
  Metrics out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      const std::string type = j.contains("type") ? j.at("type").get<std::string>() : "epoch";
      if (type == "step") {
        StepRecord r;
        r.step = j.at("step").get<long long>();
        r.epoch = number(j, "epoch");
        r.train_loss = number(j, "train_loss");
        r.lr = number(j, "lr");
        if (j.contains("loss_scale")) {
          r.loss_scale = number(j, "loss_scale");
          r.steps_skipped = j.at("steps_skipped").get<long long>();
        }
        out.steps.push_back(r);
        continue;
      }
      if (type == "eval") {
        EvalRecord r;
        r.step = j.at("step").get<long long>();
        r.lr = number(j, "lr");
        r.train_loss = number(j, "train_loss");
        r.val_loss = number(j, "val_loss");
        r.val_accuracy = number(j, "val_accuracy");
        r.seconds = number(j, "seconds");
        r.tokens_per_second = number(j, "tokens_per_second");
        if (j.contains("loss_scale")) {
          r.loss_scale = number(j, "loss_scale");
          r.steps_skipped = j.at("steps_skipped").get<long long>();
        }
        out.evals.push_back(r);
        continue;
      }
      HG_CHECK(type == "epoch", "unknown record type '", type, "'");
      EpochRecord r;
      r.epoch = j.at("epoch").get<int>();
      r.step = j.at("step").get<long long>();
      r.lr = number(j, "lr");
      r.train_loss = number(j, "train_loss");
      r.test_loss = number(j, "test_loss");
      r.test_accuracy = number(j, "test_accuracy");
      r.seconds = number(j, "seconds");
      r.samples_per_second = number(j, "samples_per_second");
      if (j.contains("loss_scale")) {
        r.loss_scale = number(j, "loss_scale");
        r.steps_skipped = j.at("steps_skipped").get<long long>();
      }
      out.epochs.push_back(r);
    } catch (const nlohmann::json::exception& e) {
      HG_FAIL("'", path, "' line ", n, " is not a metrics record (", e.what(),
              "); delete the file or point --out at a fresh folder");
    } catch (const Error& e) {
      HG_FAIL("'", path, "' line ", n, " is not a metrics record (", e.message(),
              "); delete the file or point --out at a fresh folder");
    }
  }
  return out;
}

void write_metrics(const std::string& path, const Metrics& metrics) {
  std::string text;
  size_t s = 0;
  auto write_step = [&](const StepRecord& r) {
    nlohmann::json j = {
        {"type", "step"}, {"step", r.step}, {"epoch", r.epoch}, {"train_loss", r.train_loss}, {"lr", r.lr}};
    if (!std::isnan(r.loss_scale)) {
      j["loss_scale"] = r.loss_scale;
      j["steps_skipped"] = r.steps_skipped;
    }
    text += j.dump() + "\n";
  };
  for (const EpochRecord& r : metrics.epochs) {
    for (; s < metrics.steps.size() && metrics.steps[s].step <= r.step; ++s) write_step(metrics.steps[s]);
    nlohmann::json j = {{"type", "epoch"},
                        {"epoch", r.epoch},
                        {"step", r.step},
                        {"lr", r.lr},
                        {"train_loss", r.train_loss},
                        {"test_loss", r.test_loss},
                        {"test_accuracy", r.test_accuracy},
                        {"seconds", r.seconds},
                        {"samples_per_second", r.samples_per_second}};
    if (r.has_scaler()) {
      j["loss_scale"] = r.loss_scale;
      j["steps_skipped"] = r.steps_skipped;
    }
    text += j.dump() + "\n";
  }
  for (const EvalRecord& r : metrics.evals) {
    for (; s < metrics.steps.size() && metrics.steps[s].step <= r.step; ++s) write_step(metrics.steps[s]);
    nlohmann::json j = {{"type", "eval"},
                        {"step", r.step},
                        {"lr", r.lr},
                        {"train_loss", r.train_loss},
                        {"val_loss", r.val_loss},
                        {"val_accuracy", r.val_accuracy},
                        {"seconds", r.seconds},
                        {"tokens_per_second", r.tokens_per_second}};
    if (r.has_scaler()) {
      j["loss_scale"] = r.loss_scale;
      j["steps_skipped"] = r.steps_skipped;
    }
    text += j.dump() + "\n";
  }
  for (; s < metrics.steps.size(); ++s) write_step(metrics.steps[s]);
  write_atomically(path, text);
}

std::string curves_svg(const Metrics& metrics, const std::string& title) {
  // An iteration-based run (eval records) is drawn against the step, an
  // epoch-based one against the (fractional) epoch.
  const bool by_step = !metrics.evals.empty();
  const std::string x_label = by_step ? "step" : "epoch";
  Series sub{by_step ? "train loss" : "train loss (sub-epoch)", "#9ecae1", {}};
  sub.width = 1.5;
  Series train{"train loss (epoch mean)", "#1f77b4", {}};
  Series test{by_step ? "validation loss" : "test loss", "#d62728", {}};
  Series acc{by_step ? "validation next-token accuracy" : "test accuracy", "#2ca02c", {}};
  train.markers = test.markers = acc.markers = true;
  Series scale{"loss scale", "#6a3d9a", {}};
  scale.steps = true;
  Series skipped{"", "#d62728", {}};
  skipped.triangles = true;
  double x_hi = 0.0;
  bool has_scale = false;
  long long total_skipped = 0;
  for (const StepRecord& r : metrics.steps) {
    const double x = by_step ? static_cast<double>(r.step) : r.epoch;
    sub.points.push_back({x, r.train_loss});
    x_hi = std::max(x_hi, x);
    if (!std::isnan(r.loss_scale)) {
      has_scale = true;
      scale.points.push_back({x, r.loss_scale});
      if (r.steps_skipped > total_skipped) skipped.points.push_back({x, 0.0});
      total_skipped = std::max(total_skipped, r.steps_skipped);
    }
  }
  const bool sub_epoch = !metrics.steps.empty();
  for (const EpochRecord& r : metrics.epochs) {
    // The epoch's mean loss belongs to the middle of the epoch where a sub-epoch curve shows the detail.
    train.points.push_back({static_cast<double>(r.epoch) - (metrics.steps.empty() ? 0.0 : 0.5), r.train_loss});
    test.points.push_back({static_cast<double>(r.epoch), r.test_loss});
    acc.points.push_back({static_cast<double>(r.epoch), r.test_accuracy});
    x_hi = std::max(x_hi, static_cast<double>(r.epoch));
    if (r.has_scaler()) {
      has_scale = true;
      if (!sub_epoch) {  // a file without step records: one point an epoch
        scale.points.push_back({static_cast<double>(r.epoch), r.loss_scale});
        if (r.steps_skipped > 0) skipped.points.push_back({static_cast<double>(r.epoch), 0.0});
        total_skipped += r.steps_skipped;
      }
    }
  }
  for (const EvalRecord& r : metrics.evals) {
    const double x = static_cast<double>(r.step);
    test.points.push_back({x, r.val_loss});
    acc.points.push_back({x, r.val_accuracy});
    x_hi = std::max(x_hi, x);
    has_scale = has_scale || r.has_scaler();
  }
  if (x_hi <= 0.0) x_hi = 1.0;
  skipped.name = "skipped steps (" + std::to_string(total_skipped) + " in all)";

  const int panels = has_scale ? 3 : 2;
  const int width = 70 + panels * 430 - 30;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
      << "\" height=\"400\" font-family=\"sans-serif\">\n";
  svg << "<rect width=\"" << width << "\" height=\"400\" fill=\"white\"/>\n";
  svg << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
      << escape_xml(title) << "</text>\n";
  std::vector<Series> losses;
  if (sub_epoch) losses.push_back(sub);
  if (!by_step) losses.push_back(train);
  losses.push_back(test);
  panel(svg, 70, 60, 330, 240, "loss", "cross-entropy", 0.0, x_hi, losses, 1.0, YAxis::kLinear, x_label);
  panel(svg, 500, 60, 330, 240, by_step ? "validation accuracy" : "test accuracy", "accuracy (%)", 0.0, x_hi, {acc},
        100.0, YAxis::kLinear, x_label);
  if (has_scale) {
    panel(svg, 930, 60, 330, 240, "loss scale", "scale (log2)", 0.0, x_hi, {scale, skipped}, 1.0, YAxis::kLog2,
          x_label);
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_curves(const std::string& path, const Metrics& metrics, const std::string& title) {
  write_atomically(path, curves_svg(metrics, title));
}

}  // namespace hg::train
