// Tests for softmax, log_softmax (forward and backward) and fused
// cross-entropy (forward and backward) on every device (cpu, and cuda when
// built) in f32, f16, bf16 and f64. References are computed in double from the
// already-rounded inputs, then rounded once to the output dtype; tolerances
// come from tests/kernels/tolerance.h (OpKind::kReduction: every output
// depends on a whole row). Shapes cover rows of 1, 7, 33, 1000 (one warp per
// row on CUDA) and 2049 (one block per row), ranks 1-3, a non-contiguous
// input and an empty batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/device_error.h"
#endif

using namespace hg;
using namespace hg::test;

namespace {

// Row-wise double reference over the last dim (rows of `cols` values).
std::vector<double> softmax_ref(const std::vector<double>& x, int64_t cols, bool log) {
  std::vector<double> y(x.size());
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(cols)) {
    double m = -INFINITY;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      nan = nan || std::isnan(x[base + c]);
      m = std::max(m, x[base + c]);
    }
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[base + c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = log ? (x[base + c] - m) - std::log(s) : std::exp(x[base + c] - m) / s;
      y[base + c] = nan ? NAN : v;
    }
  }
  return y;
}

// d_x by the closed forms, from d_y and the forward output y.
std::vector<double> softmax_backward_ref(const std::vector<double>& d_y, const std::vector<double>& y,
                                         int64_t cols, bool log) {
  std::vector<double> d_x(y.size());
  for (size_t base = 0; base < y.size(); base += static_cast<size_t>(cols)) {
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += log ? d_y[base + c] : d_y[base + c] * y[base + c];
    for (int64_t c = 0; c < cols; ++c) {
      d_x[base + c] = log ? d_y[base + c] - std::exp(y[base + c]) * dot : y[base + c] * (d_y[base + c] - dot);
    }
  }
  return d_x;
}

// PyTorch's cross_entropy(reduction='mean', ignore_index, label_smoothing) in double.
double cross_entropy_ref(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t cols,
                         int64_t ignore_index, double eps) {
  const std::vector<double> log_p = softmax_ref(x, cols, /*log=*/true);
  double total = 0;
  int64_t valid = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore_index) continue;
    double mean_nll = 0;
    for (int64_t c = 0; c < cols; ++c) mean_nll -= log_p[i * cols + c];
    mean_nll /= static_cast<double>(cols);
    total += (1 - eps) * -log_p[i * cols + t[i]] + eps * mean_nll;
    ++valid;
  }
  return total / static_cast<double>(valid);
}

std::vector<double> cross_entropy_backward_ref(const std::vector<double>& x, const std::vector<int64_t>& t,
                                               int64_t cols, int64_t ignore_index, double eps,
                                               double d_loss) {
  const std::vector<double> p = softmax_ref(x, cols, /*log=*/false);
  int64_t valid = 0;
  for (int64_t ti : t) valid += ti != ignore_index;
  std::vector<double> d_x(x.size(), 0.0);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore_index) continue;
    for (int64_t c = 0; c < cols; ++c) {
      const double target = eps / static_cast<double>(cols) + (c == t[i] ? 1 - eps : 0.0);
      d_x[i * cols + c] = (p[i * cols + c] - target) * d_loss / static_cast<double>(valid);
    }
  }
  return d_x;
}

struct ShapeSample {
  const char* name;
  Shape shape;
  bool noncontiguous;
  Domain domain = Domain::kAny;
};

const std::vector<ShapeSample>& softmax_shapes() {
  static const std::vector<ShapeSample> samples{
      {"len1", {1}, false},           {"len7", {7}, false},
      {"rows33", {3, 33}, false},     {"rows1000", {2, 1000}, false},
      {"rows2049", {2, 2049}, false}, {"rank3", {2, 3, 7}, false},
      {"noncontiguous", {5, 33}, true}, {"empty-batch", {0, 7}, false},
      // rows mixing 0, +-1, +-60000, 65504, +-1000, +-inf and NaN
      {"extreme", {5, 7}, false, Domain::kExtreme},
  };
  return samples;
}

DType loss_dtype_for(DType logits) { return logits == kF64 ? kF64 : kF32; }

Tensor targets_tensor(const std::vector<int64_t>& t, Device device) {
  return from_vector(t, {static_cast<int64_t>(t.size())}, {.dtype = kI64}).to(device);
}

}  // namespace

TEST_CASE("softmax and log_softmax match the double reference", "[kernels][softmax]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const ShapeSample& sample : softmax_shapes()) {
        for (bool log : {false, true}) {
          Tensor x = make_input(sample.shape, dtype, sample.domain, 11).to(device);
          if (sample.noncontiguous) x = make_noncontiguous(x);
          const Tensor y = log ? ops::log_softmax(x) : ops::softmax(x);
          INFO(label(device, dtype, std::string(log ? "log_softmax " : "softmax ") + sample.name));
          CHECK(y.dtype() == dtype);
          CHECK(y.sizes() == x.sizes());
          const auto expected = round_to(softmax_ref(values_of(x), x.size(-1), log), dtype);
          CHECK(compare_values(values_of(y), expected, tolerance_for(dtype, OpKind::kReduction)) == "");
        }
      }
    }
  }
}

TEST_CASE("softmax and log_softmax backward match the closed form", "[kernels][softmax]") {
  const std::vector<ShapeSample> shapes{{"len7", {7}, false},
                                        {"rows33", {3, 33}, false},
                                        {"rows2049", {2, 2049}, false},
                                        {"noncontiguous", {4, 9}, true},
                                        {"empty-batch", {0, 5}, false}};
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const ShapeSample& sample : shapes) {
        for (bool log : {false, true}) {
          const Tensor x = make_input(sample.shape, dtype, Domain::kAny, 5).to(device);
          Tensor d_y = make_input(sample.shape, dtype, Domain::kAny, 6).to(device);
          if (sample.noncontiguous) d_y = make_noncontiguous(d_y);
          const Tensor y = log ? ops::log_softmax(x) : ops::softmax(x);
          const Tensor d_x = log ? ops::log_softmax_backward(d_y, y) : ops::softmax_backward(d_y, y);
          INFO(label(device, dtype, std::string(log ? "log_softmax_backward " : "softmax_backward ") + sample.name));
          CHECK(d_x.dtype() == dtype);
          CHECK(d_x.sizes() == x.sizes());
          const auto expected =
              round_to(softmax_backward_ref(values_of(d_y), values_of(y), x.size(-1), log), dtype);
          CHECK(compare_values(values_of(d_x), expected, tolerance_for(dtype, OpKind::kReduction)) == "");
        }
      }
    }
  }
}

namespace {

struct CrossEntropyCase {
  const char* name;
  int64_t rows, cols;
  std::vector<int64_t> targets;
  int64_t ignore_index;
  double label_smoothing;
};

const std::vector<CrossEntropyCase>& cross_entropy_cases() {
  static const std::vector<CrossEntropyCase> cases{
      {"basic", 5, 7, {0, 6, 3, 3, 1}, -100, 0.0},
      {"ignore", 6, 33, {1, -100, 32, 0, -100, 7}, -100, 0.0},
      {"smoothing", 4, 10, {9, 0, 5, 2}, -100, 0.1},
      {"ignore+smoothing", 4, 10, {3, 4, 3, 1}, 3, 0.25},
      {"one-class", 3, 1, {0, 0, 0}, -100, 0.0},
      {"block-rows", 3, 2049, {2048, 0, 1000}, -100, 0.05},
  };
  return cases;
}

}  // namespace

TEST_CASE("cross_entropy matches the double reference", "[kernels][softmax][cross_entropy]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const CrossEntropyCase& c : cross_entropy_cases()) {
        const Tensor logits = make_input({c.rows, c.cols}, dtype, Domain::kAny, 23).to(device);
        const Tensor targets = targets_tensor(c.targets, device);
        const Tensor loss = ops::cross_entropy(logits, targets, c.ignore_index, c.label_smoothing);
        INFO(label(device, dtype, std::string("cross_entropy ") + c.name));
        CHECK(loss.dim() == 0);
        CHECK(loss.dtype() == loss_dtype_for(dtype));
        const double expected =
            cross_entropy_ref(values_of(logits), c.targets, c.cols, c.ignore_index, c.label_smoothing);
        CHECK(compare_values(values_of(loss), round_to({expected}, loss.dtype()),
                             tolerance_for(loss.dtype(), OpKind::kReduction)) == "");
      }
    }
  }
}

TEST_CASE("cross_entropy backward matches the closed form", "[kernels][softmax][cross_entropy]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const CrossEntropyCase& c : cross_entropy_cases()) {
        const Tensor logits = make_input({c.rows, c.cols}, dtype, Domain::kAny, 29).to(device);
        const Tensor targets = targets_tensor(c.targets, device);
        const double d_loss = 1.75;
        const Tensor d_logits = ops::cross_entropy_backward(scalar_tensor(d_loss, {.device = device}), logits,
                                                            targets, c.ignore_index, c.label_smoothing);
        INFO(label(device, dtype, std::string("cross_entropy_backward ") + c.name));
        CHECK(d_logits.dtype() == dtype);
        CHECK(d_logits.sizes() == logits.sizes());
        const auto expected = cross_entropy_backward_ref(values_of(logits), c.targets, c.cols,
                                                         c.ignore_index, c.label_smoothing, d_loss);
        CHECK(compare_values(values_of(d_logits), round_to(expected, dtype),
                             tolerance_for(dtype, OpKind::kReduction)) == "");
      }
    }
  }
}

// Padded rows (only the first `classes` of `cols` columns are classes), the
// one-pass backward from the forward's row_stats and the recomputing one, in
// every dtype against the double reference on the real columns. The padding
// holds +30 (it would dominate any softmax it entered) or NaN (it would poison
// it); its gradient must be exactly 0. Row lengths: odd (scalar path), and
// multiples of 8 (the 8-element chunk path on CUDA), GPT-2's 50304 / 50257.
TEST_CASE("cross_entropy with padding columns: loss, row_stats, gradient",
          "[kernels][softmax][cross_entropy][padded]") {
  struct PaddedCase {
    const char* name;
    int64_t rows, cols, classes;
    std::vector<int64_t> targets;
    double label_smoothing;
    double pad_value;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<PaddedCase> cases{
      {"odd", 4, 37, 30, {0, 29, -100, 7}, 0.0, 30.0},
      {"chunks", 5, 64, 57, {56, 0, 3, 3, 1}, 0.0, nan},
      {"chunks-partial", 3, 24, 13, {12, 0, 5}, 0.1, 30.0},
      {"unpadded-chunks", 3, 1024, 1024, {1023, 0, 512}, 0.0, 0.0},
      {"block-rows", 3, 2112, 2049, {2048, -100, 1000}, 0.0, nan},
      {"gpt2", 2, 50304, 50257, {50256, 17}, 0.0, 30.0},
  };
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const PaddedCase& c : cases) {
        INFO(label(device, dtype, std::string("padded cross_entropy ") + c.name));
        std::vector<double> x = values_of(make_input({c.rows, c.cols}, dtype, Domain::kAny, 41));
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t col = c.classes; col < c.cols; ++col) x[r * c.cols + col] = c.pad_value;
        }
        const Tensor logits = from_vector(x, {c.rows, c.cols}).to(device, dtype);
        const Tensor targets = targets_tensor(c.targets, device);
        // The reference on the real columns only (values as rounded to dtype).
        const std::vector<double> rounded = values_of(logits);
        std::vector<double> real;
        for (int64_t r = 0; r < c.rows; ++r) {
          real.insert(real.end(), rounded.begin() + r * c.cols, rounded.begin() + r * c.cols + c.classes);
        }
        const ops::CrossEntropyOutput out =
            ops::cross_entropy_fused(logits, targets, -100, c.label_smoothing, c.classes);
        const double expected = cross_entropy_ref(real, c.targets, c.classes, -100, c.label_smoothing);
        CHECK(compare_values(values_of(out.loss), round_to({expected}, out.loss.dtype()),
                             tolerance_for(out.loss.dtype(), OpKind::kReduction)) == "");
        // row_stats = (max, log sum_c exp(x_c - max)) over the real columns (0 for ignored rows).
        std::vector<double> stats_expected(static_cast<size_t>(2 * c.rows), 0.0);
        for (int64_t r = 0; r < c.rows; ++r) {
          if (c.targets[r] == -100) continue;
          double m = -INFINITY, sum = 0;
          for (int64_t col = 0; col < c.classes; ++col) m = std::max(m, real[r * c.classes + col]);
          for (int64_t col = 0; col < c.classes; ++col) sum += std::exp(real[r * c.classes + col] - m);
          stats_expected[2 * r] = m;
          stats_expected[2 * r + 1] = std::log(sum);
        }
        REQUIRE(out.row_stats.sizes() == Shape{c.rows, 2});
        CHECK(compare_values(values_of(out.row_stats), round_to(stats_expected, out.row_stats.dtype()),
                             tolerance_for(out.row_stats.dtype(), OpKind::kReduction)) == "");
        CHECK(ops::cross_entropy(logits, targets, -100, c.label_smoothing, c.classes).item<double>() ==
              values_of(out.loss)[0]);
        const double d_loss = 0.75;
        const std::vector<double> grad_real =
            cross_entropy_backward_ref(real, c.targets, c.classes, -100, c.label_smoothing, d_loss);
        std::vector<double> grad_expected(x.size(), 0.0);
        for (int64_t r = 0; r < c.rows; ++r) {
          std::copy(grad_real.begin() + r * c.classes, grad_real.begin() + (r + 1) * c.classes,
                    grad_expected.begin() + r * c.cols);
        }
        for (const bool with_stats : {true, false}) {
          INFO((with_stats ? "backward from the forward's row_stats" : "backward recomputing the statistics"));
          const Tensor d =
              ops::cross_entropy_backward(scalar_tensor(d_loss, {.device = device}), logits, targets, -100,
                                          c.label_smoothing, c.classes, with_stats ? out.row_stats : Tensor());
          REQUIRE(d.dtype() == dtype);
          const std::vector<double> got = values_of(d);
          CHECK(compare_values(got, round_to(grad_expected, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
          bool padding_zero = true;
          for (int64_t r = 0; r < c.rows; ++r) {
            for (int64_t col = c.classes; col < c.cols; ++col) padding_zero &= got[r * c.cols + col] == 0.0;
          }
          CHECK(padding_zero);
        }
      }
    }
  }
}

TEST_CASE("cross_entropy: classes and row_stats are checked", "[kernels][softmax][cross_entropy][padded]") {
  for (Device device : test_devices()) {
    const Tensor logits = make_input({2, 8}, kF32, Domain::kAny, 3).to(device);
    const Tensor targets = targets_tensor({1, 5}, device);
    CHECK_THROWS_WITH(ops::cross_entropy(logits, targets, -100, 0.0, 9),
                      Catch::Contains("classes must be in [0, C = 8]"));
    CHECK_THROWS_WITH(ops::cross_entropy(logits, targets, -100, 0.0, -1), Catch::Contains("classes"));
    const Tensor one = scalar_tensor(1.0, {.device = device});
    CHECK_THROWS_WITH(ops::cross_entropy_backward(one, logits, targets, -100, 0.0, 0, zeros({2}, {.device = device})),
                      Catch::Contains("row_stats"));
    CHECK_THROWS_WITH(ops::cross_entropy_backward(one, logits, targets, -100, 0.0, 0,
                                                  zeros({2, 2}, {.dtype = kF64, .device = device})),
                      Catch::Contains("row_stats"));
    // A target among the padding columns is out of range (the CPU throws at once).
    if (device.is_cpu()) {
      CHECK_THROWS_WITH(ops::cross_entropy(logits, targets, -100, 0.0, 4), Catch::Contains("out of range [0, 4)"));
    }
  }
}

TEST_CASE("cross_entropy backward matches a central difference", "[kernels][softmax][cross_entropy]") {
  const int64_t rows = 3, cols = 4;
  const std::vector<int64_t> t{2, -100, 0};
  const double eps = 0.2;
  const Tensor logits = make_input({rows, cols}, kF64, Domain::kAny, 31);
  const std::vector<double> x = values_of(logits);
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-6;
    std::vector<double> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    numeric[i] = (cross_entropy_ref(plus, t, cols, -100, eps) - cross_entropy_ref(minus, t, cols, -100, eps)) /
                 (2 * h);
  }
  for (Device device : test_devices()) {
    const Tensor d_logits = ops::cross_entropy_backward(scalar_tensor(1.0, {.dtype = kF64, .device = device}),
                                                        logits.to(device), targets_tensor(t, device), -100, eps);
    INFO(device.str());
    // The central difference carries ~1e-9 error; f64 rows are held to 1e-7.
    CHECK(compare_values(values_of(d_logits), numeric, kNumericDerivativeF64) == "");
  }
}

TEST_CASE("all-ignored and empty batches give a NaN loss like torch", "[kernels][softmax][cross_entropy]") {
  for (Device device : test_devices()) {
    const Tensor logits = make_input({2, 5}, kF32, Domain::kAny, 3).to(device);
    CHECK(std::isnan(ops::cross_entropy(logits, targets_tensor({-100, -100}, device)).item<float>()));
    const Tensor empty_logits = zeros({0, 5}, {.device = device});
    CHECK(std::isnan(ops::cross_entropy(empty_logits, targets_tensor({}, device)).item<float>()));
    // The backward of an all-ignored batch is all zeros (0 * NaN is avoided).
    const Tensor d = ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), logits,
                                                 targets_tensor({-100, -100}, device));
    CHECK(values_of(d) == std::vector<double>(10, 0.0));
    // logits [C] with a rank-0 target: one sample.
    const Tensor one = ops::cross_entropy(logits.select(0, 1), scalar_tensor(3, {.dtype = kI64}).to(device));
    const Tensor batch = ops::cross_entropy(logits.slice(0, 1, 2), targets_tensor({3}, device));
    CHECK(one.item<float>() == batch.item<float>());
  }
}

TEST_CASE("softmax family of logits +-1000 in fp16 is finite and matches fp32", "[kernels][softmax][numerics]") {
  const std::vector<double> values{1000, -1000, 999, 0, -1000, -1000, -999, -1000, 1000, 1000, -1000, 998};
  const std::vector<int64_t> t{0, 2, 3};
  for (Device device : test_devices()) {
    const Tensor x16 = from_vector(values, {3, 4}, {.dtype = kF16}).to(device);
    const Tensor x32 = x16.to(kF32);
    for (bool log : {false, true}) {
      const Tensor y16 = log ? ops::log_softmax(x16) : ops::softmax(x16);
      const Tensor y32 = log ? ops::log_softmax(x32) : ops::softmax(x32);
      INFO(label(device, kF16, log ? "log_softmax +-1000" : "softmax +-1000"));
      for (double v : values_of(y16)) CHECK(std::isfinite(v));
      CHECK(compare_values(values_of(y16), round_to(values_of(y32), kF16),
                           tolerance_for(kF16, OpKind::kReduction)) == "");
    }
    const float loss16 = ops::cross_entropy(x16, targets_tensor(t, device)).item<float>();
    const float loss32 = ops::cross_entropy(x32, targets_tensor(t, device)).item<float>();
    CHECK(std::isfinite(loss16));
    CHECK(loss16 == Approx(loss32).epsilon(1.3e-6));
    const Tensor d16 = ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), x16,
                                                   targets_tensor(t, device));
    const Tensor d32 = ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), x32,
                                                   targets_tensor(t, device));
    for (double v : values_of(d16)) CHECK(std::isfinite(v));
    CHECK(compare_values(values_of(d16), round_to(values_of(d32), kF16),
                         tolerance_for(kF16, OpKind::kReduction)) == "");
  }
}

TEST_CASE("NaN in a row propagates to that row only", "[kernels][softmax][numerics]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (int64_t cols : {7, 2049}) {
        std::vector<double> v = values_of(make_input({3, cols}, kF64, Domain::kAny, 8));
        v[static_cast<size_t>(cols + 2)] = NAN;  // row 1
        const Tensor x = from_vector(v, {3, cols}, {.dtype = dtype}).to(device);
        INFO(label(device, dtype, "NaN row, cols " + std::to_string(cols)));
        for (bool log : {false, true}) {
          const auto y = values_of(log ? ops::log_softmax(x) : ops::softmax(x));
          for (int64_t r = 0; r < 3; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              CHECK(std::isnan(y[static_cast<size_t>(r * cols + c)]) == (r == 1));
            }
          }
        }
        CHECK(std::isnan(ops::cross_entropy(x, targets_tensor({0, 1, 2}, device)).item<double>()));
        CHECK(std::isfinite(ops::cross_entropy(x, targets_tensor({0, -100, 2}, device)).item<double>()));
        const auto d = values_of(ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), x,
                                                             targets_tensor({0, 1, 2}, device)));
        for (int64_t r = 0; r < 3; ++r) CHECK(std::isnan(d[static_cast<size_t>(r * cols)]) == (r == 1));
      }
    }
  }
}

TEST_CASE("softmax and cross_entropy reject bad input with a helpful error", "[kernels][softmax][errors]") {
  using Catch::Contains;
  for (Device device : test_devices()) {
    INFO(device.str());
    const Tensor logits = zeros({4, 10}, {.device = device});
    const Tensor targets = targets_tensor({1, 2, 3, 4}, device);
    CHECK_THROWS_WITH(ops::softmax(scalar_tensor(1.0, {.device = device})),
                      Contains("softmax") && Contains("rank 0"));
    CHECK_THROWS_WITH(ops::log_softmax(zeros({3}, {.dtype = kI64, .device = device})),
                      Contains("log_softmax") && Contains("floating"));
    CHECK_THROWS_WITH(ops::softmax_backward(zeros({2, 3}, {.device = device}), zeros({3, 2}, {.device = device})),
                      Contains("softmax_backward") && Contains("[2, 3]") && Contains("[3, 2]"));
    CHECK_THROWS_WITH(ops::cross_entropy(logits, targets.to(kI32)),
                      Contains("cross_entropy") && Contains("i64") && Contains(".to(hg::kI64)"));
    CHECK_THROWS_WITH(ops::cross_entropy(logits.to(kI64), targets), Contains("cross_entropy") && Contains("floating"));
    CHECK_THROWS_WITH(ops::cross_entropy(zeros({2, 2, 10}, {.device = device}), targets),
                      Contains("cross_entropy") && Contains("[N, C]") && Contains("[2, 2, 10]"));
    CHECK_THROWS_WITH(ops::cross_entropy(logits, targets_tensor({1, 2, 3}, device)),
                      Contains("cross_entropy") && Contains("[3]") && Contains("[4, 10]"));
    CHECK_THROWS_WITH(ops::cross_entropy(logits, targets, -100, 1.5), Contains("label_smoothing"));
    CHECK_THROWS_WITH(ops::cross_entropy_backward(zeros({1}, {.device = device}), logits, targets),
                      Contains("cross_entropy_backward") && Contains("rank 0"));
    if (device.is_cuda()) {
      CHECK_THROWS_WITH(ops::cross_entropy(logits, targets.cpu()),
                        Contains("cross_entropy") && Contains("different devices"));
    }
    // Out-of-range targets on the CPU: thrown at once.
    if (device.is_cpu()) {
      const Tensor bad = targets_tensor({1, 2, 3, 12}, device);
      CHECK_THROWS_WITH(ops::cross_entropy(logits, bad),
                        Contains("cross_entropy: target 12 at row 3 is out of range [0, 10)"));
      CHECK_THROWS_WITH(ops::cross_entropy_backward(scalar_tensor(1.0), logits, targets_tensor({-1, 0, 0, 0}, device)),
                        Contains("cross_entropy_backward: target -1 at row 0 is out of range [0, 10)"));
    }
  }
}

TEST_CASE("softmax family on rows of 50,257 and 65,536 columns", "[kernels][softmax][cross_entropy]") {
  // GPT-2's vocabulary and 2^16: on CUDA one 1024-thread block per row, the
  // largest launch of the row kernels (__launch_bounds__(1024)). Two rows
  // each, so the emulator and ASan stay fast; every dtype, f64 references.
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (int64_t cols : {int64_t{50257}, int64_t{65536}}) {
        const Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
        const Tensor x = make_input({2, cols}, dtype, Domain::kAny, 41).to(device);
        const Tensor d_y = make_input({2, cols}, dtype, Domain::kAny, 42).to(device);
        const std::vector<double> xs = values_of(x);
        for (bool log : {false, true}) {
          INFO(label(device, dtype, std::string(log ? "log_softmax " : "softmax ") + std::to_string(cols)));
          const Tensor y = log ? ops::log_softmax(x) : ops::softmax(x);
          CHECK(compare_values(values_of(y), round_to(softmax_ref(xs, cols, log), dtype), tol) == "");
          const Tensor d_x = log ? ops::log_softmax_backward(d_y, y) : ops::softmax_backward(d_y, y);
          const auto expected = softmax_backward_ref(values_of(d_y), values_of(y), cols, log);
          CHECK(compare_values(values_of(d_x), round_to(expected, dtype), tol) == "");
        }
        INFO(label(device, dtype, "cross_entropy " + std::to_string(cols)));
        const std::vector<int64_t> t{cols - 1, 17};
        const Tensor targets = targets_tensor(t, device);
        const Tensor loss = ops::cross_entropy(x, targets, -100, 0.1);
        CHECK(compare_values(values_of(loss), round_to({cross_entropy_ref(xs, t, cols, -100, 0.1)}, loss.dtype()),
                             tolerance_for(loss.dtype(), OpKind::kReduction)) == "");
        const Tensor d_logits =
            ops::cross_entropy_backward(scalar_tensor(1.5, {.device = device}), x, targets, -100, 0.1);
        CHECK(compare_values(values_of(d_logits),
                             round_to(cross_entropy_backward_ref(xs, t, cols, -100, 0.1, 1.5), dtype), tol) == "");
      }
    }
  }
}

#if defined(HG_WITH_CUDA)
TEST_CASE("out-of-range targets on CUDA set the device error flag", "[kernels][softmax][errors]") {
  using Catch::Contains;
  const Device device = Device::cuda(0);
  const Tensor logits = make_input({4, 10}, kF32, Domain::kAny, 2).to(device);
  const Tensor bad = targets_tensor({1, 2, 3, 12}, device);
  hg::cuda::check_device_errors();  // nothing pending
  const Tensor loss = ops::cross_entropy(logits, bad);  // no sync, no throw here
  // Reading the loss is a sync point: the device hooks check the flag there.
  CHECK_THROWS_WITH(loss.item<float>(), Contains("cross_entropy: target 12 at row 3 is out of range [0, 10)") &&
                                            Contains("ignore_index (-100)"));
  CHECK_NOTHROW(hg::cuda::check_device_errors());  // reported once, then cleared

  // The first error wins; the backward reports under its own name.
  const Tensor d = ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), logits,
                                               targets_tensor({-7, 0, 11, 0}, device));
  (void)d;
  CHECK_THROWS_WITH(values_of(d), Contains("cross_entropy_backward: target"));
  CHECK_NOTHROW(hg::cuda::check_device_errors());

  // The context is not poisoned: the next valid call works.
  const Tensor good = targets_tensor({1, 2, 3, 9}, device);
  const double expected = cross_entropy_ref(values_of(logits), {1, 2, 3, 9}, 10, -100, 0.0);
  CHECK(ops::cross_entropy(logits, good).item<float>() == Approx(expected).epsilon(1e-5));
}
#endif

#if defined(HG_WITH_CUDA)
TEST_CASE("the device error flag is checked on the stream that raised it", "[kernels][softmax][errors]") {
  using Catch::Contains;
  const Device device = Device::cuda(0);
  const Tensor logits = make_input({4, 10}, kF32, Domain::kAny, 3).to(device);
  const Tensor bad = targets_tensor({1, 2, 3, 12}, device);
  const Tensor good = targets_tensor({1, 2, 3, 4}, device);
  hg::cuda::check_device_errors();
  CHECK(hg::cuda::device_error_streams_pending() == 0);
  const hg::cuda::Stream side = hg::cuda::Stream::create();
  const hg::cuda::Stream other = hg::cuda::Stream::create();
  {
    hg::cuda::StreamGuard on_side(side);
    (void)ops::cross_entropy(logits, bad);  // reports on `side`
  }
  {
    hg::cuda::StreamGuard on_other(other);
    (void)ops::cross_entropy(logits, good);  // clean, on `other`
    // Both streams may have raised: a check made while `other` is current
    // waits for `side` too and finds the error `side` raised.
    CHECK(hg::cuda::device_error_streams_pending() == 2);
    CHECK_THROWS_WITH(hg::cuda::check_device_errors(), Contains("cross_entropy: target 12 at row 3"));
    CHECK(hg::cuda::device_error_streams_pending() == 0);
    CHECK_NOTHROW(hg::cuda::check_device_errors());  // reported once
  }
  // A sync point on the default stream (item of an unrelated tensor) sees an
  // error raised on a side stream.
  {
    hg::cuda::StreamGuard on_side(side);
    (void)ops::cross_entropy_backward(scalar_tensor(1.0, {.device = device}), logits, bad);
  }
  const Tensor unrelated = full({1}, 2.0, {.device = device});
  CHECK_THROWS_WITH(unrelated.item<float>(), Contains("cross_entropy_backward: target 12"));
  // No kernel that can report has run since: a sync point costs no flag copy.
  CHECK(hg::cuda::device_error_streams_pending() == 0);
  CHECK(unrelated.item<float>() == 2.0f);
}
#endif

// Note [16-bit kernels through f32 on the CPU]: 16-bit rows give the bits of the
// per-element contract, which is the f32 kernel on the widened values followed
// by one rounding. Rows shorter and longer than the parallel grain, normal and
// extreme values (NaN, inf, huge) so that NaN rows and overflow are covered.
// A NaN may come out with another sign or payload: which operand's NaN x86
// propagates follows the compiler's operand order, which may differ between
// the f32 and 16-bit instantiations of one kernel (as in Note [16-bit
// element-wise blocks on the CPU]); every other value must match bit for bit.
TEST_CASE("16-bit softmax rows are bit-identical to the f32 path", "[kernels][softmax][numerics]") {
  const auto same_bits = [](const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
    const Tensor ac = a.contiguous(), bc = b.contiguous();
    const auto* pa = static_cast<const uint16_t*>(ac.data_ptr());
    const auto* pb = static_cast<const uint16_t*>(bc.data_ptr());
    const std::vector<double> va = values_of(ac), vb = values_of(bc);
    for (int64_t i = 0; i < a.numel(); ++i) {
      const auto k = static_cast<size_t>(i);
      if (std::isnan(va[k]) && std::isnan(vb[k])) continue;
      if (pa[i] != pb[i]) return false;
    }
    return true;
  };
  for (DType dtype : {kF16, kBF16}) {
    for (const Shape& shape : {Shape{7, 33}, Shape{40, 1000}}) {
      for (Domain domain : {Domain::kAny, Domain::kExtreme}) {
        INFO(dtype << " " << shape_to_string(shape) << (domain == Domain::kExtreme ? " extreme" : ""));
        const Tensor x = make_input(shape, dtype, domain, 71);
        const Tensor d = make_input(shape, dtype, Domain::kAny, 72);
        const Tensor xf = x.to(kF32), df = d.to(kF32);
        CHECK(same_bits(ops::softmax(x), ops::softmax(xf).to(dtype)));
        CHECK(same_bits(ops::log_softmax(x), ops::log_softmax(xf).to(dtype)));
        CHECK(same_bits(ops::softmax_backward(d, x), ops::softmax_backward(df, xf).to(dtype)));
        CHECK(same_bits(ops::log_softmax_backward(d, x), ops::log_softmax_backward(df, xf).to(dtype)));
      }
    }
  }
}

TEST_CASE("softmax and log_softmax over dims 0, 1, 2 of a 3-D tensor", "[kernels][softmax]") {
  const Shape shape{3, 4, 5};
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      const Tensor x = make_input(shape, dtype, Domain::kAny, 41).to(dev);
      const std::vector<double> xv = values_of(x);
      for (int64_t d = 0; d < 3; ++d) {
        for (bool log : {false, true}) {
          // Reference: walk each line along d in double.
          const int64_t strides[3] = {20, 5, 1};
          std::vector<double> want(xv.size());
          for (int64_t i = 0; i < 60; ++i) {
            const int64_t base = i - ((i / strides[d]) % shape[d]) * strides[d];
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < shape[d]; ++k) m = std::max(m, xv[base + k * strides[d]]);
            for (int64_t k = 0; k < shape[d]; ++k) s += std::exp(xv[base + k * strides[d]] - m);
            want[i] = log ? xv[i] - m - std::log(s) : std::exp(xv[i] - m) / s;
          }
          const Tensor y = log ? hg::log_softmax(x, d) : hg::softmax(x, d);
          INFO(label(dev, dtype, std::string(log ? "log_softmax" : "softmax") + " dim " + std::to_string(d)));
          CHECK(compare_values(values_of(y), round_to(want, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
        }
      }
    }
  }
}

TEST_CASE("gradcheck passes for softmax and log_softmax over a middle dim (f64, cpu)", "[autograd][gradcheck]") {
  using V = const std::vector<Tensor>&;
  struct Case {
    std::string name;
    Shape shape;
    std::function<Tensor(V)> fn;
  };
  const std::vector<Case> cases{
      {"softmax dim 0", {3, 4, 5}, [](V x) { return hg::softmax(x[0], 0); }},
      {"softmax dim 1", {3, 4, 5}, [](V x) { return hg::softmax(x[0], 1); }},
      {"log_softmax dim 1", {3, 4, 5}, [](V x) { return hg::log_softmax(x[0], -2); }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(gradcheck(c.fn, {make_input(c.shape, kF64, Domain::kAny, 51).requires_grad_(true)}) == "");
  }
}
