#include "examples/train_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

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

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `span`.
double nice_step(double span, int n) {
  const double raw = span / std::max(n, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10.0 * p;
}

struct Series {
  std::string name, color;
  std::vector<double> y;
};

// One panel: axes at (x0, y0) of size (w, h), epochs on x, the series on y.
void panel(std::ostringstream& svg, double x0, double y0, double w, double h, const std::string& title,
           const std::string& y_label, const std::vector<int>& epochs, const std::vector<Series>& series,
           double y_scale, bool legend_at_bottom) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    for (double v : s.y) {
      if (std::isfinite(v)) lo = std::min(lo, v * y_scale), hi = std::max(hi, v * y_scale);
    }
  }
  if (!std::isfinite(lo)) lo = 0.0, hi = 1.0;
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double step = nice_step(hi - lo, 5);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  const int first = epochs.empty() ? 1 : epochs.front();
  const int last = epochs.empty() ? 1 : std::max(epochs.back(), first + 1);
  auto px = [&](double e) { return x0 + (e - first) / (last - first) * w; };
  auto py = [&](double v) { return y0 + h - (v - lo) / (hi - lo) * h; };

  svg << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 - 12 << "\" text-anchor=\"middle\" font-size=\"14\">" << title
      << "</text>\n";
  svg << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << h
      << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double v = lo; v <= hi + step / 2; v += step) {
    svg << "<line x1=\"" << x0 << "\" x2=\"" << x0 + w << "\" y1=\"" << py(v) << "\" y2=\"" << py(v)
        << "\" stroke=\"#ddd\"/>\n";
    svg << "<text x=\"" << x0 - 6 << "\" y=\"" << py(v) + 4 << "\" text-anchor=\"end\" font-size=\"11\">"
        << format(step < 0.1 ? "%.2f" : step < 1 ? "%.1f" : "%.0f", v) << "</text>\n";
  }
  const int tick_every = std::max(1, (last - first) / 8);
  for (int e = first; e <= last; e += tick_every) {
    svg << "<text x=\"" << px(e) << "\" y=\"" << y0 + h + 16 << "\" text-anchor=\"middle\" font-size=\"11\">" << e
        << "</text>\n";
  }
  svg << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 + h + 34 << "\" text-anchor=\"middle\" font-size=\"12\">epoch</text>\n";
  svg << "<text transform=\"translate(" << x0 - 44 << "," << y0 + h / 2
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << y_label << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < s.y.size() && i < epochs.size(); ++i) {
      if (std::isfinite(s.y[i])) svg << px(epochs[i]) << "," << py(s.y[i] * y_scale) << " ";
    }
    svg << "\"/>\n";
    for (size_t i = 0; i < s.y.size() && i < epochs.size(); ++i) {
      if (std::isfinite(s.y[i])) {
        svg << "<circle cx=\"" << px(epochs[i]) << "\" cy=\"" << py(s.y[i] * y_scale) << "\" r=\"3\" fill=\""
            << s.color << "\"/>\n";
      }
    }
    // The legend sits in the corner the curves leave free (losses fall, accuracy rises).
    const double ly = legend_at_bottom ? y0 + h - 10 - 16 * static_cast<double>(series.size() - 1 - k)
                                       : y0 + 14 + 16 * static_cast<double>(k);
    svg << "<line x1=\"" << x0 + w - 110 << "\" x2=\"" << x0 + w - 90 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
        << "\" stroke=\"" << s.color << "\" stroke-width=\"2\"/>\n";
    svg << "<text x=\"" << x0 + w - 84 << "\" y=\"" << ly << "\" font-size=\"11\">" << s.name << "</text>\n";
  }
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<EpochRecord> read_metrics(const std::string& path) {
  std::vector<EpochRecord> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      EpochRecord r;
      r.epoch = j.at("epoch").get<int>();
      r.step = j.at("step").get<long long>();
      // JSON has no NaN: nlohmann writes a non-finite double as null, so null reads back as NaN.
      auto number = [&](const char* key) {
        const nlohmann::json& v = j.at(key);
        return v.is_null() ? std::nan("") : v.get<double>();
      };
      r.lr = number("lr");
      r.train_loss = number("train_loss");
      r.test_loss = number("test_loss");
      r.test_accuracy = number("test_accuracy");
      r.seconds = number("seconds");
      r.samples_per_second = number("samples_per_second");
      out.push_back(r);
    } catch (const nlohmann::json::exception& e) {
      HG_FAIL("'", path, "' line ", n, " is not a metrics record (", e.what(),
              "); delete the file or point --out at a fresh folder");
    }
  }
  return out;
}

void write_metrics(const std::string& path, const std::vector<EpochRecord>& records) {
  std::string text;
  for (const EpochRecord& r : records) {
    nlohmann::json j = {{"epoch", r.epoch},
                        {"step", r.step},
                        {"lr", r.lr},
                        {"train_loss", r.train_loss},
                        {"test_loss", r.test_loss},
                        {"test_accuracy", r.test_accuracy},
                        {"seconds", r.seconds},
                        {"samples_per_second", r.samples_per_second}};
    text += j.dump() + "\n";
  }
  write_atomically(path, text);
}

std::string curves_svg(const std::vector<EpochRecord>& records, const std::string& title) {
  std::vector<int> epochs;
  Series train{"train loss", "#1f77b4", {}}, test{"test loss", "#d62728", {}}, acc{"test accuracy", "#2ca02c", {}};
  for (const EpochRecord& r : records) {
    epochs.push_back(r.epoch);
    train.y.push_back(r.train_loss);
    test.y.push_back(r.test_loss);
    acc.y.push_back(r.test_accuracy);
  }
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"380\" font-family=\"sans-serif\">\n";
  svg << "<rect width=\"900\" height=\"380\" fill=\"white\"/>\n";
  svg << "<text x=\"450\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" << escape_xml(title)
      << "</text>\n";
  panel(svg, 70, 60, 340, 260, "loss", "cross-entropy", epochs, {train, test}, 1.0, false);
  panel(svg, 530, 60, 340, 260, "test accuracy", "accuracy (%)", epochs, {acc}, 100.0, true);
  svg << "</svg>\n";
  return svg.str();
}

void write_curves(const std::string& path, const std::vector<EpochRecord>& records, const std::string& title) {
  write_atomically(path, curves_svg(records, title));
}

}  // namespace hg::train
