// Tests for conv2d, max/avg/adaptive-avg pooling and batch_norm: forward
// against direct double-precision loops (the formulas of kernels/conv/conv.h) in
// every dtype and in NCHW and channels-last layouts, gradcheck in f64 for
// every option, batch-norm running statistics and eval mode, and bad input.
// Tolerances come from tests/kernels/tolerance.h (OpKind::kReduction).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "kernels/conv/conv.h"
#include "runtime/cpu/threads.h"
#include "kernels/gemm/gemm.h"
#include "nn/conv.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// Values in [-1, 1) rounded to dtype (the reference reads the rounded values).
Tensor small_input(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return (rand(shape, {.dtype = kF64}, &gen) * 2.0 - 1.0).to(dtype);
}

// The same values stored channels-last (NHWC strides, NCHW logical shape).
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

struct ConvCase {
  std::string name;
  Shape x, w;  // [N, C, H, W], [O, C/g, KH, KW]
  Conv2dOptions opt;
  bool bias = true;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"plain 3x3", {2, 3, 7, 6}, {4, 3, 3, 3}, {}},
      {"stride 2 pad 1", {2, 3, 8, 7}, {5, 3, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}}},
      {"asymmetric stride/pad, 1x2 kernel", {1, 2, 6, 9}, {3, 2, 1, 2}, {.stride = {1, 3}, .padding = {0, 2}}},
      {"dilation 2", {2, 2, 9, 8}, {3, 2, 3, 2}, {.padding = {2, 1}, .dilation = {2, 3}}},
      {"groups 2", {2, 4, 6, 6}, {6, 2, 3, 3}, {.padding = {1, 1}, .groups = 2}},
      {"depthwise", {2, 3, 5, 6}, {6, 1, 3, 3}, {.stride = {2, 1}, .padding = {1, 1}, .groups = 3}},
      {"same, odd kernel", {1, 2, 5, 5}, {3, 2, 3, 3}, {.padding_same = true}},
      {"same, even kernel + dilation", {1, 2, 6, 5}, {2, 2, 4, 2}, {.dilation = {1, 2}, .padding_same = true}},
      {"no bias", {2, 3, 5, 5}, {2, 3, 2, 2}, {.stride = {2, 2}}, false},
  };
}

// Direct convolution in double (reference for every dtype).
std::vector<double> conv_ref(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o, Shape* out) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), KH = w.size(2),
                KW = w.size(3), G = o.groups, Cg = C / G, Og = O / G;
  int64_t plo[2], phi[2];
  for (int d = 0; d < 2; ++d) {
    if (o.padding_same) {
      const int64_t t = o.dilation[d] * (w.size(2 + d) - 1);
      plo[d] = t / 2;
      phi[d] = t - t / 2;
    } else {
      plo[d] = phi[d] = o.padding[d];
    }
  }
  const int64_t OH = (H + plo[0] + phi[0] - o.dilation[0] * (KH - 1) - 1) / o.stride[0] + 1;
  const int64_t OW = (W + plo[1] + phi[1] - o.dilation[1] * (KW - 1) - 1) / o.stride[1] + 1;
  *out = {N, O, OH, OW};
  const auto xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>(O, 0.0);
  std::vector<double> y(N * O * OH * OW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = bv[oc];
          const int64_t g = oc / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = i * o.stride[0] - plo[0] + kh * o.dilation[0];
                const int64_t iw = j * o.stride[1] - plo[1] + kw * o.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[((n * C + g * Cg + c) * H + ih) * W + iw] * wv[((oc * Cg + c) * KH + kh) * KW + kw];
              }
          y[((n * O + oc) * OH + i) * OW + j] = s;
        }
  return y;
}

const std::vector<DType> kAllFloat{kF32, kF16, kBF16, kF64};

}  // namespace

TEST_CASE("conv2d forward matches direct loops in every dtype and layout", "[kernels][conv]") {
  for (const ConvCase& c : conv_cases()) {
    for (DType dt : kAllFloat) {
      for (bool cl : {false, true}) {
        INFO(c.name << " " << dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
        Tensor x = small_input(c.x, dt, 1), w = small_input(c.w, dt, 2);
        Tensor b = c.bias ? small_input({c.w[0]}, dt, 3) : Tensor();
        Shape shape;
        const auto expected = round_to(conv_ref(x, w, b, c.opt, &shape), dt);
        Tensor xin = cl ? channels_last(x) : x;
        Tensor y = hg::conv2d(xin, w, b, c.opt);
        CHECK(y.sizes() == shape);
        if (cl && c.w[0] > 1) CHECK(is_channels_last(y));  // the layout is kept
        CHECK(compare_values(values_of(y.contiguous()), expected, tolerance_for(dt, OpKind::kReduction)) == "");
      }
    }
  }
}

TEST_CASE("conv2d gradients pass gradcheck in f64 for every option", "[kernels][conv][gradcheck]") {
  for (const ConvCase& c : conv_cases()) {
    for (bool cl : {false, true}) {
      INFO(c.name << (cl ? " channels-last" : " NCHW"));
      Tensor x = small_input(c.x, kF64, 4), w = small_input(c.w, kF64, 5);
      if (cl) x = channels_last(x);
      std::vector<Tensor> in{x.requires_grad_(true), w.requires_grad_(true)};
      if (c.bias) in.push_back(small_input({c.w[0]}, kF64, 6).requires_grad_(true));
      const Conv2dOptions opt = c.opt;
      CHECK(gradcheck(
                [opt](const std::vector<Tensor>& t) {
                  return hg::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), opt);
                },
                in) == "");
    }
  }
}

TEST_CASE("conv2d backward matches the f64 gradients in 16-bit and f32", "[kernels][conv]") {
  const ConvCase c = conv_cases()[4];  // groups
  Tensor x64 = small_input(c.x, kF64, 7), w64 = small_input(c.w, kF64, 8), b64 = small_input({c.w[0]}, kF64, 9);
  Tensor dy64 = small_input({2, 6, 6, 6}, kF64, 10);
  for (DType dt : {kF32, kF16, kBF16}) {
    for (bool cl : {false, true}) {
      INFO(dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
      Tensor x = x64.to(dt), w = w64.to(dt), d_y = dy64.to(dt);
      auto [rdx, rdw, rdb] =
          ops::conv2d_backward(d_y.to(kF64), x.to(kF64), w.to(kF64),
                               Conv2dParams{.pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 2}, {true, true, true});
      auto [d_x, d_w, d_b] =
          ops::conv2d_backward(cl ? channels_last(d_y) : d_y, cl ? channels_last(x) : x, w,
                               Conv2dParams{.pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 2}, {true, true, true});
      if (cl) CHECK(is_channels_last(d_x));
      // Sums of up to 72 products: the 16-bit rows hold with fp32 sums and one rounding.
      const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
      CHECK(compare_values(values_of(d_x.contiguous()), round_to(values_of(rdx), dt), tol) == "");
      CHECK(compare_values(values_of(d_w), round_to(values_of(rdw), dt), tol) == "");
      CHECK(compare_values(values_of(d_b), round_to(values_of(rdb), dt), tol) == "");
    }
  }
}

namespace {

// Direct f64 gradients of conv2d (the formulas of kernels/conv/conv.h, summed
// product by product) and, per element, the sum of the products' magnitudes
// (for the worst-case bound of long f32 sums below).
struct ConvGradRef {
  std::vector<double> dx, dx_abs, dw, dw_abs, db, db_abs;
  int64_t dx_terms = 0, dw_terms = 0, db_terms = 0;  // the most products in one element's sum
};

ConvGradRef conv_grad_ref(const Tensor& d_y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), KH = w.size(2),
                KW = w.size(3), OH = d_y.size(2), OW = d_y.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const auto xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>(),
             gv = d_y.contiguous().to_vector<double>();
  ConvGradRef r;
  r.dx.assign(xv.size(), 0.0);
  r.dx_abs.assign(xv.size(), 0.0);
  r.dw.assign(wv.size(), 0.0);
  r.dw_abs.assign(wv.size(), 0.0);
  r.db.assign(O, 0.0);
  r.db_abs.assign(O, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          const double g = gv[((n * O + o) * OH + i) * OW + j];
          r.db[o] += g;
          r.db_abs[o] += std::fabs(g);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = i * p.stride[0] - p.pad_lo[0] + kh * p.dilation[0];
                const int64_t iw = j * p.stride[1] - p.pad_lo[1] + kw * p.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + (o / Og) * Cg + c) * H + ih) * W + iw,
                              wi = ((o * Cg + c) * KH + kh) * KW + kw;
                r.dx[xi] += g * wv[wi];
                r.dx_abs[xi] += std::fabs(g * wv[wi]);
                r.dw[wi] += g * xv[xi];
                r.dw_abs[wi] += std::fabs(g * xv[xi]);
              }
        }
  r.dx_terms = Og * KH * KW;
  r.dw_terms = N * OH * OW;
  r.db_terms = N * OH * OW;
  return r;
}

// got against the f64 reference: the dtype's row of tests/kernels/tolerance.h
// (OpKind::kReduction) for the reference rounded to dtype. Documented
// override, as in test_gemm: the f32 row holds fp32 sums of up to ~100
// products; a longer sum in any fp32 order may err by up to the worst-case
// bound gamma_K * sum|products|, gamma_K = K eps / (1 - K eps) (Higham,
// "Accuracy and Stability of Numerical Algorithms", 3.1), plus the one
// rounding of the result.
std::string compare_sum(const std::vector<double>& got, const std::vector<double>& expected,
                        const std::vector<double>& abs_sum, int64_t terms, DType dt) {
  if (dt != kF32 || terms <= 100)
    return compare_values(got, round_to(expected, dt), tolerance_for(dt, OpKind::kReduction));
  if (got.size() != expected.size()) return "size mismatch";
  const double eps = 0x1p-24,
               gamma = static_cast<double>(terms + 2) * eps / (1.0 - static_cast<double>(terms + 2) * eps);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - expected[i]) <= gamma * abs_sum[i] + eps * std::fabs(expected[i]))) {
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
             std::to_string(expected[i]) + " (bound " + std::to_string(gamma * abs_sum[i]) + ")";
    }
  }
  return "";
}

Conv2dParams params_of(const ConvCase& c) {
  Conv2dParams p;
  for (int d = 0; d < 2; ++d) {
    p.stride[d] = c.opt.stride[d];
    p.dilation[d] = c.opt.dilation[d];
    if (c.opt.padding_same) {
      const int64_t t = c.opt.dilation[d] * (c.w[2 + d] - 1);
      p.pad_lo[d] = t / 2;
      p.pad_hi[d] = t - t / 2;
    } else {
      p.pad_lo[d] = p.pad_hi[d] = c.opt.padding[d];
    }
  }
  p.groups = c.opt.groups;
  return p;
}

// Channel counts of real networks (multiples of 16, oneDNN's blocked kernels;
// C = 1, where NCHW and NHWC are the same memory) on top of conv_cases().
std::vector<ConvCase> wide_conv_cases() {
  return {
      {"CNN layer 1 (C = 1)", {4, 1, 28, 28}, {32, 1, 3, 3}, {.padding = {1, 1}}},
      {"CNN layer 2", {2, 32, 14, 14}, {64, 32, 3, 3}, {.padding = {1, 1}}},
      {"16 channels, stride 2", {2, 16, 9, 9}, {32, 16, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}}},
      {"32 channels, groups 2", {2, 32, 8, 8}, {32, 16, 3, 3}, {.padding = {1, 1}, .groups = 2}},
      {"16 channels, dilation 2", {1, 16, 10, 10}, {16, 16, 3, 3}, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"1x1, no bias", {2, 64, 7, 7}, {32, 64, 1, 1}, {}, false},
  };
}

enum class Layout { nchw, channels_last, strided };

Tensor in_layout(const Tensor& t, Layout l) {
  if (l == Layout::channels_last) return channels_last(t);
  if (l == Layout::nchw) return t;
  // Not dense in any order: every other column of a twice-as-wide tensor.
  Tensor wide = zeros({t.size(0), t.size(1), t.size(2), 2 * t.size(3)}, {.dtype = t.dtype()});
  Tensor view = wide.slice(3, 0, 2 * t.size(3), 2);
  view.copy_(t);
  return view;
}

const char* layout_name(Layout l) {
  return l == Layout::nchw ? " NCHW" : l == Layout::channels_last ? " channels-last" : " strided";
}

}  // namespace

TEST_CASE("conv2d forward and every gradient match direct f64 loops on both CPU paths", "[kernels][conv]") {
  std::vector<ConvCase> cases = conv_cases();
  for (const ConvCase& c : wide_conv_cases()) cases.push_back(c);
  INFO("CPU convolution path (f32): " << cpu::conv_path(kF32));
  for (const ConvCase& c : cases) {
    const Conv2dParams p = params_of(c);
    for (DType dt : kAllFloat) {
      for (Layout l : {Layout::nchw, Layout::channels_last, Layout::strided}) {
        INFO(c.name << " " << dtype_name(dt) << layout_name(l));
        Tensor x = small_input(c.x, dt, 11), w = small_input(c.w, dt, 12);
        Tensor b = c.bias ? small_input({c.w[0]}, dt, 13) : Tensor();
        Shape shape;
        const auto y_ref = conv_ref(x, w, b, c.opt, &shape);
        std::vector<double> y_abs;  // sum |b| + |x w| per output: conv_ref of |x|, |w|, |b|
        {
          Shape unused;
          y_abs = conv_ref(x.to(kF64).abs(), w.to(kF64).abs(), c.bias ? b.to(kF64).abs() : Tensor(), c.opt, &unused);
        }
        const Tensor y = ops::conv2d(in_layout(x, l), w, b, p);
        REQUIRE(y.sizes() == shape);
        const int64_t fwd_terms = c.w[1] * c.w[2] * c.w[3] + 1;
        CHECK(compare_sum(values_of(y.contiguous()), y_ref, y_abs, fwd_terms, dt) == "");

        const Tensor d_y = small_input(shape, dt, 14);
        const ConvGradRef r = conv_grad_ref(d_y, x, w, p);
        auto [d_x, d_w, d_b] = ops::conv2d_backward(in_layout(d_y, l), in_layout(x, l), w, p, {true, true, c.bias});
        if (l == Layout::channels_last && c.x[1] > 1) CHECK(is_channels_last(d_x));
        CHECK(compare_sum(values_of(d_x.contiguous()), r.dx, r.dx_abs, r.dx_terms, dt) == "");
        CHECK(compare_sum(values_of(d_w), r.dw, r.dw_abs, r.dw_terms, dt) == "");
        if (c.bias) CHECK(compare_sum(values_of(d_b), r.db, r.db_abs, r.db_terms, dt) == "");
        // Each gradient alone (the other primitives not run; d_b alone is the bias loop).
        auto [dx_only, n1, n2] = ops::conv2d_backward(d_y, x, w, p, {true, false, false});
        CHECK(compare_sum(values_of(dx_only.contiguous()), r.dx, r.dx_abs, r.dx_terms, dt) == "");
        auto [n3, dw_only, db_only] = ops::conv2d_backward(d_y, x, w, p, {false, true, false});
        CHECK(compare_sum(values_of(dw_only), r.dw, r.dw_abs, r.dw_terms, dt) == "");
        if (c.bias) {
          auto [n4, n5, db_alone] = ops::conv2d_backward(d_y, x, w, p, {true, false, true});
          CHECK(compare_sum(values_of(db_alone), r.db, r.db_abs, r.db_terms, dt) == "");
        }
      }
    }
  }
}

// The path switch (HG_CPU_CONV, read once): ctest runs the [conv] tests again
// as test_conv_im2col (HG_CPU_CONV=im2col) and test_conv_onednn
// (HG_CPU_CONV=onednn); this case checks that the switch took effect.
TEST_CASE("CPU convolution paths: HG_CPU_CONV chooses, the counts say what ran", "[kernels][conv]") {
  const char* env = std::getenv("HG_CPU_CONV");
  const std::string forced = env != nullptr ? env : "";
  const char* isa = std::getenv("HG_CPU_ISA");
  const bool generic = isa != nullptr && std::string(isa) == "generic";
  INFO("HG_CPU_CONV='" << forced << "', f32 path " << cpu::conv_path(kF32) << " ('" << cpu::conv_im2col_reason(kF32)
                       << "'), bf16 path " << cpu::conv_path(kBF16) << " ('" << cpu::conv_im2col_reason(kBF16) << "')");
  CHECK(std::string(cpu::conv_path(kF64)) == "im2col");
  for (DType dt : {kF32, kBF16, kF16, kF64}) {
    CHECK((std::string(cpu::conv_path(dt)) == "onednn") == std::string(cpu::conv_im2col_reason(dt)).empty());
  }
  if (!cpu::gemm_has_onednn()) {
    for (DType dt : {kF32, kBF16, kF16}) CHECK(std::string(cpu::conv_im2col_reason(dt)) == "this build has no oneDNN");
  } else if (forced == "im2col") {
    for (DType dt : {kF32, kBF16, kF16}) CHECK(std::string(cpu::conv_im2col_reason(dt)) == "HG_CPU_CONV=im2col");
  } else if (forced == "onednn" && !generic) {
    CHECK(std::string(cpu::conv_path(kF32)) == "onednn");
    CHECK(std::string(cpu::conv_path(kBF16)) == "onednn");
  }
  // A convolution forward and backward runs on the path conv_path names (these
  // shapes have oneDNN kernels on every x86-64 ISA it supports for f32; bf16
  // only where the CPU has native bf16, which the bf16 GEMM's path reports).
  for (DType dt : {kF32, kBF16}) {
    const bool onednn = std::string(cpu::conv_path(dt)) == "onednn";
    if (onednn && dt == kBF16 && std::string(cpu::gemm_bf16_widen_reason()) != "") continue;
    for (bool cl : {false, true}) {
      INFO(dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
      Tensor x = small_input({2, 16, 8, 8}, dt, 21), w = small_input({32, 16, 3, 3}, dt, 22),
             b = small_input({32}, dt, 23);
      if (cl) x = channels_last(x);
      const Conv2dParams p{.pad_lo = {1, 1}, .pad_hi = {1, 1}};
      const cpu::ConvCounts before = cpu::conv_counts();
      const Tensor y = ops::conv2d(x, w, b, p);
      const cpu::ConvCounts mid = cpu::conv_counts();
      ops::conv2d_backward(y, x, w, p, {true, true, true});
      const cpu::ConvCounts after = cpu::conv_counts();
      CHECK(after.onednn - before.onednn == (onednn ? 2 : 0));
      CHECK(after.im2col - before.im2col == (onednn ? 0 : 2));
      // Channels-last activations are never reordered: the forward reorders
      // at most the weights into the primitive's layout.
      if (onednn && cl) CHECK(mid.reorders - before.reorders <= 1);
      if (!onednn) CHECK(after.reorders == before.reorders);
    }
  }
  // Another thread count builds another primitive (the count is in the cache
  // key): the results agree with the f64 reference at 1 thread and at the
  // previous count.
  const int threads = get_num_threads();
  const ConvCase c = wide_conv_cases()[1];
  const Conv2dParams p = params_of(c);
  Tensor x = small_input(c.x, kF32, 31), w = small_input(c.w, kF32, 32), b = small_input({c.w[0]}, kF32, 33);
  Shape shape;
  const auto y_ref = conv_ref(x, w, b, c.opt, &shape);
  Shape unused;
  const auto y_abs = conv_ref(x.to(kF64).abs(), w.to(kF64).abs(), b.to(kF64).abs(), c.opt, &unused);
  for (int n : {1, threads, 1}) {
    INFO(n << " thread(s)");
    set_num_threads(n);
    const Tensor y = ops::conv2d(x, w, b, p);
    CHECK(compare_sum(values_of(y), y_ref, y_abs, c.w[1] * c.w[2] * c.w[3] + 1, kF32) == "");
  }
  set_num_threads(threads);
}

TEST_CASE("conv2d rejects bad input with the shapes and the fix", "[kernels][conv][errors]") {
  Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const hg::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string channels = message([&] { hg::conv2d(x, zeros({4, 2, 3, 3})); });
  CHECK_THAT(channels, Catch::Contains("[4, 2, 3, 3]") && Catch::Contains("[2, 3, 8, 8]") &&
                           Catch::Contains("make weight [O, C/groups, KH, KW] = [4, 3, 3, 3]"));
  const std::string big = message([&] { hg::conv2d(x, zeros({4, 3, 11, 3}), {}, {.padding = {1, 1}}); });
  CHECK_THAT(big, Catch::Contains("padded input [2, 3, 8, 8] has only 10") && Catch::Contains("smaller kernel"));
  const std::string groups = message([&] { hg::conv2d(x, zeros({4, 1, 3, 3}), {}, {.groups = 2}); });
  CHECK_THAT(groups, Catch::Contains("groups=2 must divide") && Catch::Contains("[2, 3, 8, 8]"));
  const std::string rank = message([&] { hg::conv2d(zeros({3, 8, 8}), w); });
  CHECK_THAT(rank, Catch::Contains("must be 4-D [N, C, H, W], got [3, 8, 8]") && Catch::Contains("unsqueeze(0)"));
  const std::string bias = message([&] { hg::conv2d(x, w, zeros({3})); });
  CHECK_THAT(bias, Catch::Contains("bias [3] must be [4]"));
  const std::string same = message([&] { hg::conv2d(x, w, {}, {.stride = {2, 2}, .padding_same = true}); });
  CHECK_THAT(same, Catch::Contains("needs stride 1"));
  const std::string dtype = message([&] { hg::conv2d(x, w.to(kF64)); });
  CHECK_THAT(dtype, Catch::Contains("convert them to one dtype"));
  const std::string pool = message([&] { hg::max_pool2d(zeros({1, 1, 2, 2}), {3, 3}); });
  CHECK_THAT(pool, Catch::Contains("larger than the padded input [1, 1, 2, 2]"));
  const std::string bn = message([&] {
    nn::BatchNorm2d layer(4);
    layer.forward(x);
  });
  CHECK_THAT(bn, Catch::Contains("BatchNorm2d(4): input must be [N, 4, H, W], got [2, 3, 8, 8]"));
#if defined(HG_WITH_CUDA)
  // Input on CUDA, weight on the CPU: named, not a crash in cuDNN.
  const std::string cuda = message([&] { hg::conv2d(x.to(Device::cuda(0)), w); });
  CHECK_THAT(cuda, Catch::Contains("different devices") && Catch::Contains(".to(device)"));
#endif
}

// ---- pooling --------------------------------------------------------------------------------

namespace {

struct PoolRef {
  std::vector<double> y;
  std::vector<int64_t> idx;
  Shape shape;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// max (with arg-max: first maximum in window order, NaN wins) or average, in double.
PoolRef pool_ref(const Tensor& x, const Pool2dParams& p, bool max) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = out_size(H, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], p.ceil_mode);
  const int64_t OW = out_size(W, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], p.ceil_mode);
  const auto xv = x.contiguous().to_vector<double>();
  PoolRef r;
  r.shape = {N, C, OH, OW};
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double best = -INFINITY, sum = 0;
        int64_t arg = -1, cnt = 0;
        for (int64_t kh = 0; kh < p.kernel[0]; ++kh)
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const int64_t h = i * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            const int64_t w = j * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = xv[(nc * H + h) * W + w];
            if (arg < 0 || v > best || std::isnan(v)) {
              best = v;
              arg = h * W + w;
            }
            sum += v;
            ++cnt;
          }
        if (max) {
          r.y.push_back(best);
          r.idx.push_back(arg);
        } else {
          // Divisor: the window clipped to the padded input, or to the input.
          const int64_t h0 = i * p.stride[0] - p.padding[0], w0 = j * p.stride[1] - p.padding[1];
          const int64_t hp = std::min(h0 + p.kernel[0], H + p.padding[0]) - h0;
          const int64_t wp = std::min(w0 + p.kernel[1], W + p.padding[1]) - w0;
          r.y.push_back(sum / static_cast<double>(p.count_include_pad ? hp * wp : cnt));
        }
      }
  return r;
}

std::vector<Pool2dParams> pool_cases(bool max) {
  std::vector<Pool2dParams> v{
      {.kernel = {2, 2}, .stride = {2, 2}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
      {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}, .ceil_mode = true},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false},
  };
  if (max) v.push_back({.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 2}, .ceil_mode = true});
  return v;
}

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d match direct loops; backward routes as PyTorch", "[kernels][pool]") {
  for (bool max : {true, false}) {
    for (const Pool2dParams& p : pool_cases(max)) {
      for (DType dt : kAllFloat) {
        for (bool cl : {false, true}) {
          INFO((max ? "max" : "avg") << " k" << p.kernel[0] << "x" << p.kernel[1] << " s" << p.stride[0] << " p"
                                     << p.padding[0] << " d" << p.dilation[0] << " ceil " << p.ceil_mode << " "
                                     << dtype_name(dt) << (cl ? " NHWC" : " NCHW"));
          Tensor x = small_input({2, 3, 7, 8}, dt, 11);
          const PoolRef ref = pool_ref(x, p, max);
          Tensor xin = cl ? channels_last(x) : x;
          if (max) {
            auto [y, idx] = ops::max_pool2d(xin, p);
            REQUIRE(y.sizes() == ref.shape);
            if (cl) CHECK(is_channels_last(y));
            CHECK(values_of(y.contiguous()) == ref.y);  // a max is exact
            CHECK(idx.contiguous().to_vector<int64_t>() == ref.idx);
          } else {
            Tensor y = ops::avg_pool2d(xin, p);
            REQUIRE(y.sizes() == ref.shape);
            CHECK(compare_values(values_of(y.contiguous()), round_to(ref.y, dt),
                                 tolerance_for(dt, OpKind::kReduction)) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("max_pool2d ties go to the first maximum and NaN wins, as PyTorch", "[kernels][pool]") {
  Tensor x = from_vector(std::vector<double>{1, 3, 3, 0,  //
                                             3, 2, NAN, 1},
                         {1, 1, 2, 4}, {.dtype = kF32});
  auto [y, idx] = ops::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}});
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{1, 6});
  CHECK(std::isnan(values_of(y)[1]));
  // Overlapping windows: the gradient of a shared maximum adds up; all-zero
  // windows route to their first element.
  Tensor z = from_vector(std::vector<double>{0, 5, 0, 0, 0, 0}, {1, 1, 1, 6}, {.dtype = kF64}).requires_grad_(true);
  hg::sum(hg::max_pool2d(z, {1, 3}, {1, 1})).backward();
  CHECK(values_of(z.grad()) == std::vector<double>{0, 2, 1, 1, 0, 0});
}

TEST_CASE("max_pool2d 2x2: ties, NaN and -inf across wide rows match a sequential scan", "[kernels][pool]") {
  // Values from {-inf, -1, 0, 1, NaN}: most windows hold ties, some NaNs (one
  // or two), some only -inf. Rows of 20 columns (10 outputs) cover the
  // four-at-a-time loop and its scalar tail.
  const int64_t N = 2, C = 3, H = 6, W = 20;
  std::vector<double> v(static_cast<size_t>(N * C * H * W));
  const double pool[5] = {-INFINITY, -1.0, 0.0, 1.0, NAN};
  uint64_t state = 12345;
  for (double& e : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    e = pool[(state >> 33) % 5];
  }
  // The sequential scan of kernels/conv/conv.h: take a later value when greater or NaN.
  std::vector<double> want_y;
  std::vector<int64_t> want_i;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < H / 2; ++i)
      for (int64_t j = 0; j < W / 2; ++j) {
        double best = -INFINITY;
        int64_t arg = 2 * i * W + 2 * j;
        for (int64_t dh = 0; dh < 2; ++dh)
          for (int64_t dw = 0; dw < 2; ++dw) {
            const int64_t at = (2 * i + dh) * W + 2 * j + dw;
            const double e = v[static_cast<size_t>(nc * H * W + at)];
            if (e > best || std::isnan(e)) {
              best = e;
              arg = at;
            }
          }
        want_y.push_back(best);
        want_i.push_back(arg);
      }
  for (DType dt : kAllFloat) {
    for (bool cl : {false, true}) {
      INFO(dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
      Tensor x = from_vector(v, {N, C, H, W}, {.dtype = kF64}).to(dt);
      auto [y, idx] = ops::max_pool2d(cl ? channels_last(x) : x, {.kernel = {2, 2}, .stride = {2, 2}});
      CHECK(idx.contiguous().to_vector<int64_t>() == want_i);
      const auto got = values_of(y.contiguous());
      REQUIRE(got.size() == want_y.size());
      for (size_t k = 0; k < got.size(); ++k) {
        INFO("output " << k);
        CHECK((std::isnan(want_y[k]) ? std::isnan(got[k]) : got[k] == want_y[k]));
      }
    }
  }
}

TEST_CASE("max_pool2d 2x2 backward puts each d_y at its window's argmax, odd sizes and every layout",
          "[kernels][pool]") {
  // 7 x 9 planes: the last row and column belong to no window and get 0.
  const int64_t N = 2, C = 3, H = 7, W = 9;
  const Pool2dParams p{.kernel = {2, 2}, .stride = {2, 2}};
  for (DType dt : kAllFloat) {
    for (bool cl : {false, true}) {
      INFO(dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
      Tensor x = small_input({N, C, H, W}, dt, 31), dy = small_input({N, C, H / 2, W / 2}, dt, 32);
      auto [y, idx] = ops::max_pool2d(cl ? channels_last(x) : x, p);
      const Tensor dx = ops::max_pool2d_backward(cl ? channels_last(dy) : dy, cl ? channels_last(x) : x, idx, p);
      REQUIRE(dx.sizes() == x.sizes());
      // The reference: scatter d_y to the recorded flat index of its plane.
      const std::vector<int64_t> at = idx.contiguous().to_vector<int64_t>();
      const std::vector<double> g = values_of(dy);
      std::vector<double> want(static_cast<size_t>(N * C * H * W), 0.0);
      for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t k = 0; k < (H / 2) * (W / 2); ++k) {
          const size_t o = static_cast<size_t>(nc * (H / 2) * (W / 2) + k);
          want[static_cast<size_t>(nc * H * W + at[o])] += g[o];
        }
      CHECK(values_of(dx.contiguous()) == want);  // one d_y per place: exact
    }
  }
}

namespace {

// Distinct values (k * 37 mod 173, a permutation for k < 173) so no max sits
// within the finite-difference step of a tie.
Tensor distinct_input(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  REQUIRE(n < 173);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<double>((k * 37) % 173) / 17.3 - 5.0;
  return from_vector(v, shape, {.dtype = kF64});
}

}  // namespace

TEST_CASE("pooling gradients pass gradcheck in f64", "[kernels][pool][gradcheck]") {
  for (bool cl : {false, true}) {
    INFO((cl ? "channels-last" : "NCHW"));
    Tensor x = distinct_input({2, 2, 6, 7});
    if (cl) x = channels_last(x);
    x.requires_grad_(true);
    CHECK(gradcheck(
              [](const std::vector<Tensor>& t) {
                return hg::max_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
              },
              {x}) == "");
    CHECK(gradcheck(
              [](const std::vector<Tensor>& t) {
                return hg::max_pool2d(t[0], {2, 2}, {1, 2}, {1, 0}, {2, 1});
              },
              {x}) == "");
    CHECK(gradcheck(
              [](const std::vector<Tensor>& t) {
                return hg::avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}, true, false);
              },
              {x}) == "");
    CHECK(gradcheck(
              [](const std::vector<Tensor>& t) {
                return hg::avg_pool2d(t[0], {2, 3}, {2, 1}, {1, 1});
              },
              {x}) == "");
    CHECK(gradcheck([](const std::vector<Tensor>& t) { return hg::adaptive_avg_pool2d(t[0], {4, 3}); }, {x}) == "");
    CHECK(gradcheck([](const std::vector<Tensor>& t) { return hg::adaptive_avg_pool2d(t[0], {1, 1}); }, {x}) == "");
  }
}

TEST_CASE("adaptive_avg_pool2d matches direct loops", "[kernels][pool]") {
  for (DType dt : kAllFloat) {
    Tensor x = small_input({2, 3, 7, 5}, dt, 13);
    Tensor y = hg::adaptive_avg_pool2d(x, {3, 2});
    const auto xv = values_of(x);
    std::vector<double> ref;
    for (int64_t nc = 0; nc < 6; ++nc)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t h0 = i * 7 / 3, h1 = ((i + 1) * 7 + 2) / 3, w0 = j * 5 / 2, w1 = ((j + 1) * 5 + 1) / 2;
          double s = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) s += xv[static_cast<size_t>((nc * 7 + h) * 5 + w)];
          ref.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
    INFO(dtype_name(dt));
    CHECK(compare_values(values_of(y), round_to(ref, dt), tolerance_for(dt, OpKind::kReduction)) == "");
  }
}

// ---- batch norm -----------------------------------------------------------------------------

TEST_CASE("batch_norm forward, running statistics and eval mode match the formulas", "[kernels][batchnorm]") {
  for (DType dt : kAllFloat) {
    for (bool cl : {false, true}) {
      INFO(dtype_name(dt) << (cl ? " NHWC" : " NCHW"));
      const int64_t N = 3, C = 2, H = 4, W = 5, m = N * H * W;
      Tensor x = (small_input({N, C, H, W}, dt, 14) * 2.0 + 0.5).to(dt);
      Tensor w = small_input({C}, kF32, 15), b = small_input({C}, kF32, 16);
      if (dt == kF64) w = w.to(kF64), b = b.to(kF64);
      Tensor rm = zeros({C}, {.dtype = w.dtype()}), rv = ones({C}, {.dtype = w.dtype()});
      Tensor y = hg::batch_norm(cl ? channels_last(x) : x, rm, rv, w, b, true, 0.1, 1e-5);
      const auto xv = values_of(x), wv = values_of(w), bv = values_of(b);
      std::vector<double> ref(xv.size()), rm_ref, rv_ref;
      for (int64_t c = 0; c < C; ++c) {
        double mean = 0, ss = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < H * W; ++k) mean += xv[static_cast<size_t>((n * C + c) * H * W + k)];
        mean /= m;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < H * W; ++k)
            ss += std::pow(xv[static_cast<size_t>((n * C + c) * H * W + k)] - mean, 2);
        const double rstd = 1.0 / std::sqrt(ss / m + 1e-5);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < H * W; ++k) {
            const size_t i = static_cast<size_t>((n * C + c) * H * W + k);
            ref[i] = (xv[i] - mean) * rstd * wv[c] + bv[c];
          }
        rm_ref.push_back(0.1 * mean);
        rv_ref.push_back(0.9 + 0.1 * ss / (m - 1));
      }
      const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
      CHECK(compare_values(values_of(y.contiguous()), round_to(ref, dt), tol) == "");
      const Tolerance stat_tol = tolerance_for(w.dtype(), OpKind::kReduction);
      CHECK(compare_values(values_of(rm), rm_ref, stat_tol) == "");
      CHECK(compare_values(values_of(rv), rv_ref, stat_tol) == "");
      // Eval: normalised by the running statistics just written.
      Tensor ye = hg::batch_norm(x, rm, rv, w, b, false);
      std::vector<double> eref(xv.size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < H * W; ++k) {
            const size_t i = static_cast<size_t>((n * C + c) * H * W + k);
            eref[i] = (xv[i] - values_of(rm)[c]) / std::sqrt(values_of(rv)[c] + 1e-5) * wv[c] + bv[c];
          }
      CHECK(compare_values(values_of(ye), round_to(eref, dt), tol) == "");
      CHECK(compare_values(values_of(rm), rm_ref, stat_tol) == "");  // eval leaves them alone
    }
  }
}

TEST_CASE("batch_norm gradients pass gradcheck in f64, training and eval", "[kernels][batchnorm][gradcheck]") {
  for (bool training : {true, false}) {
    for (bool cl : {false, true}) {
      INFO((training ? "training" : "eval") << (cl ? " NHWC" : " NCHW"));
      Tensor x = small_input({3, 2, 3, 4}, kF64, 17);
      if (cl) x = channels_last(x);
      Tensor rm = small_input({2}, kF64, 18), rv = small_input({2}, kF64, 19) + 2.0;
      std::vector<Tensor> in{x.requires_grad_(true), small_input({2}, kF64, 20).requires_grad_(true),
                             small_input({2}, kF64, 21).requires_grad_(true)};
      CHECK(gradcheck(
                [&](const std::vector<Tensor>& t) {
                  return hg::batch_norm(t[0], rm, rv, t[1], t[2], training, 0.1, 1e-5);
                },
                in) == "");
    }
  }
}

TEST_CASE("nn layers: Conv2d init and shapes, BatchNorm2d buffers in the state_dict", "[nn][conv]") {
  Generator gen(3);
  nn::Conv2d conv(4, 6, 3, {.padding = {1, 1}, .groups = 2}, true, &gen);
  CHECK(conv.weight.sizes() == Shape{6, 2, 3, 3});
  const double bound = 1.0 / std::sqrt(18.0);  // fan_in = 2 * 3 * 3
  for (double v : values_of(conv.weight)) CHECK(std::fabs(v) <= bound);
  for (double v : values_of(conv.bias)) CHECK(std::fabs(v) <= bound);
  CHECK(conv.forward(zeros({1, 4, 5, 5})).sizes() == Shape{1, 6, 5, 5});
  nn::BatchNorm2d bn(6);
  std::vector<std::string> names;
  for (const auto& [name, t] : bn.state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  bn.forward(small_input({2, 6, 3, 3}, kF32, 22));
  bn.forward(small_input({2, 6, 3, 3}, kF32, 23));
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
  bn.eval();
  bn.forward(small_input({2, 6, 3, 3}, kF32, 24));
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
}
