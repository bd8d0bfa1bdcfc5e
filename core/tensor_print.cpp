// operator<< for tensors, formatted the way PyTorch prints them:
//   tensor([[ 1.5000, -2.0000],
//           [ 0.2500,  3.0000]], dtype=f16)
// Floats use one format for the whole tensor: integers print as "1.", values
// in a comfortable range with 4 decimals, others in scientific notation.
// Tensors over 1000 elements show the first and last 3 entries of each dim.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hg {

namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct FloatFormat {
  enum Kind { kInteger, kFixed, kScientific } kind = kFixed;
  size_t width = 1;
};

std::string format_float(double v, FloatFormat::Kind kind) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  switch (kind) {
    case FloatFormat::kInteger:
      std::snprintf(buf, sizeof buf, "%.0f.", v);
      break;
    case FloatFormat::kFixed:
      std::snprintf(buf, sizeof buf, "%.4f", v);
      break;
    case FloatFormat::kScientific:
      std::snprintf(buf, sizeof buf, "%.4e", v);
      break;
  }
  return buf;
}

class Printer {
 public:
  Printer(const Tensor& host, bool summarize) : t_(host), summarize_(summarize) {
    values_ = host.to_vector<double>();
    floating_ = is_floating(host.dtype());
    if (floating_) choose_float_format();
    for (double v : values_) width_ = std::max(width_, format(v).size());
  }

  std::string render() {
    std::string out;
    std::vector<int64_t> index;
    render_dim(out, 0, 0, index);
    return out;
  }

 private:
  void choose_float_format() {
    bool all_integer = true;
    double max_abs = 0.0, min_abs = INFINITY;
    for (double v : values_) {
      if (!std::isfinite(v)) continue;
      if (v != std::floor(v)) all_integer = false;
      const double a = std::fabs(v);
      max_abs = std::max(max_abs, a);
      if (a != 0.0) min_abs = std::min(min_abs, a);
    }
    if (all_integer) {
      kind_ = max_abs >= 1e8 ? FloatFormat::kScientific : FloatFormat::kInteger;
    } else {
      const bool wide_range = max_abs / min_abs > 1000.0 && max_abs > 1e3;
      kind_ = (max_abs >= 1e8 || min_abs < 1e-4 || wide_range) ? FloatFormat::kScientific
                                                               : FloatFormat::kFixed;
    }
  }

  std::string format(double v) const {
    if (floating_) return format_float(v, kind_);
    if (t_.dtype() == DType::Bool) return v != 0.0 ? "True" : "False";
    return std::to_string(static_cast<long long>(v));
  }

  // Which indices of a dim of size n are shown (all, or edges with a gap).
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (!summarize_ || n <= 2 * kEdgeItems) {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);  // the "..." marker
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  void render_dim(std::string& out, int64_t d, int64_t flat_base, std::vector<int64_t>& index) {
    const int64_t rank = t_.dim();
    if (rank == 0) {
      out += format(values_[0]);
      return;
    }
    const int64_t n = t_.sizes()[d];
    int64_t inner = 1;
    for (int64_t k = d + 1; k < rank; ++k) inner *= t_.sizes()[k];
    out += '[';
    const auto idx = shown(n);
    for (size_t j = 0; j < idx.size(); ++j) {
      if (j > 0) {
        out += ',';
        if (d == rank - 1) {
          out += ' ';
        } else {
          out += std::string(static_cast<size_t>(rank - 1 - d), '\n');
          out += std::string(static_cast<size_t>(d + 1) + kIndent, ' ');
        }
      }
      if (idx[j] < 0) {
        out += "...";
        continue;
      }
      if (d == rank - 1) {
        const std::string s = format(values_[static_cast<size_t>(flat_base + idx[j])]);
        out += std::string(width_ - s.size(), ' ') + s;
      } else {
        render_dim(out, d + 1, flat_base + idx[j] * inner, index);
      }
    }
    out += ']';
  }

  static constexpr size_t kIndent = 7;  // strlen("tensor(")
  const Tensor& t_;
  bool summarize_;
  bool floating_ = false;
  FloatFormat::Kind kind_ = FloatFormat::kFixed;
  std::vector<double> values_;
  size_t width_ = 1;
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const Tensor host = t.to(Device::cpu());
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
  } else {
    body = Printer(host, t.numel() > kSummarizeAbove).render();
  }
  os << "tensor(" << body;
  if (t.numel() == 0 && t.dim() != 1) os << ", size=" << t.shape_str();
  if (!t.is_cpu()) os << ", device='" << t.device() << "'";
  // Like PyTorch, the default dtypes (f32, i64, bool) are not printed.
  if (t.dtype() != kF32 && t.dtype() != kI64 && t.dtype() != kBool) os << ", dtype=" << t.dtype();
  if (t.requires_grad()) os << ", requires_grad=True";
  return os << ')';
}

}  // namespace hg
