// fp8 training (Note [fp8 linear backward], Note [fp8 routing] in amp/fp8.h):
// the differentiable fp8 Linear against an f64 reference, the delayed-scaling
// state machine against Transformer Engine's formula step by step, routing,
// saturation counts, checkpoint resume bit for bit, no host syncs, and a
// char-level GPT trained in fp8 against amp-bf16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amp/fp8.h"
#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/float8.h"
#include "core/generator.h"
#include "runtime/cpu/threads.h"
#include "kernels/ops.h"
#include "nn/layers.h"
#include "nn/models/gpt.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Contains;

namespace {

std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
#if defined(HG_WITH_CUDA)
  d.push_back(Device::cuda(0));
#endif
  return d;
}

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to(kF64).to_vector<double>(); }
std::vector<float> floats(const Tensor& t) { return t.to(Device::cpu()).to(kF32).to_vector<float>(); }
float scalar(const Tensor& t) { return t.to(Device::cpu()).to(kF32).item<float>(); }

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = floats(a), y = floats(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The reference quantiser, independent of the kernels: the f32 product, then
// the saturating conversion for finite values (tests/core checks it exhaustively).
double quantize_ref(double x, float s, DType fp8) {
  const auto v = static_cast<float>(static_cast<double>(static_cast<float>(x)) * static_cast<double>(s));
  return fp8 == kF8E4M3 ? static_cast<double>(static_cast<float>(float8_e4m3::from_float_saturate(v)))
                        : static_cast<double>(static_cast<float>(float8_e5m2::from_float_saturate(v)));
}

std::vector<double> quantize_all(const std::vector<double>& xs, float s, DType fp8) {
  std::vector<double> q(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) q[i] = quantize_ref(xs[i], s, fp8);
  return q;
}

// Counts the entries of a GEMM result outside the bound of Note [fp8 GEMM]:
// out[i, j] = s * sum_r A[i, r] B[j, r] (A [rows, red], B [cols, red], the
// quantised values), |out - ref| <= e + 3 u32 (|ref| + e) + u_out (|ref| + ...),
// e = gamma(red) s sum_r |A B|: the f32 accumulation over `red` terms, the f32
// scale product and multiply, then one rounding to the output type.
int64_t outside_bound(const std::vector<double>& got, const std::vector<double>& a, const std::vector<double>& b,
                      int64_t rows, int64_t cols, int64_t red, double s, double u_out) {
  const double u32 = 0x1p-24;
  const double gamma = static_cast<double>(red) * u32 / (1.0 - static_cast<double>(red) * u32);
  int64_t outside = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double dot = 0, abs_dot = 0;
      for (int64_t r = 0; r < red; ++r) {
        const double p = a[static_cast<size_t>(i * red + r)] * b[static_cast<size_t>(j * red + r)];
        dot += p;
        abs_dot += std::fabs(p);
      }
      const double ref = s * dot, e = gamma * s * abs_dot;
      const double inner = e + 3 * u32 * (std::fabs(ref) + e);
      const double bound = inner + u_out * (std::fabs(ref) + inner);
      outside += std::fabs(got[static_cast<size_t>(i * cols + j)] - ref) > bound;
    }
  }
  return outside;
}

std::vector<double> transpose(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<double> t(v.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + i)] = v[static_cast<size_t>(i * cols + j)];
  }
  return t;
}

float amax_host(const Tensor& t) {
  float m = 0;
  for (float v : floats(t)) m = std::max(m, std::fabs(v));
  return m;
}

double unit_roundoff(DType t) { return t == kF32 ? 0x1p-24 : t == kBF16 ? 0x1p-8 : 0x1p-11; }

}  // namespace

TEST_CASE("fp8_linear backward: dX, dW and db against the f64 product of the quantised operands",
          "[amp][fp8][backward]") {
  struct Case {
    int64_t m, k, n;  // M not a multiple of 16; K not a multiple of the 128 block
    DType x_dtype;
    amp::Fp8Format format;
    amp::Fp8Scaling scaling;
  };
  const std::vector<Case> cases = {
      {37, 144, 48, kBF16, amp::Fp8Format::hybrid, amp::Fp8Scaling::current},
      {10, 48, 32, kF32, amp::Fp8Format::e4m3, amp::Fp8Scaling::current},
      {21, 32, 16, kF32, amp::Fp8Format::hybrid, amp::Fp8Scaling::delayed},
  };
  for (const Device dev : devices()) {
    for (const Case& c : cases) {
      INFO(dev.str() << " M=" << c.m << " K=" << c.k << " N=" << c.n << " x " << c.x_dtype);
      amp::Fp8State st(1, {.format = c.format, .scaling = c.scaling, .amax_history_len = 2}, dev);
      const Tensor x = make_input({c.m, c.k}, kF32, Domain::kAny, 1).to(c.x_dtype).to(dev).requires_grad_();
      const Tensor w =
          ops::binary_scalar(OpId::mul, make_input({c.n, c.k}, kF32, Domain::kAny, 2), 0.05).to(dev).requires_grad_();
      const Tensor b = make_input({c.n}, kF32, Domain::kAny, 3).to(dev).requires_grad_();
      const Tensor g =
          ops::binary_scalar(OpId::mul, make_input({c.m, c.n}, kF32, Domain::kAny, 4), 1e-3).to(kBF16).to(dev);
      const Tensor y = amp::fp8_linear(x, w, b, st, 0, kBF16);
      REQUIRE(y.dtype() == kBF16);
      y.backward(g);
      REQUIRE(x.grad().defined());
      REQUIRE(w.grad().defined());
      REQUIRE(b.grad().defined());
      CHECK(x.grad().dtype() == c.x_dtype);
      CHECK(w.grad().dtype() == kF32);
      const float sx = scalar(st.scale(0, amp::Fp8Role::input)), sw = scalar(st.scale(0, amp::Fp8Role::weight)),
                  sg = scalar(st.scale(0, amp::Fp8Role::grad_output));
      const DType g_fmt = st.dtype(amp::Fp8Role::grad_output);
      if (c.scaling == amp::Fp8Scaling::current) {
        double gmax = 0;
        for (double v : values(g)) gmax = std::max(gmax, std::fabs(v));
        CHECK(sg == fp8_max(g_fmt) / static_cast<float>(gmax));
      }
      const std::vector<double> qx = quantize_all(values(x), sx, kF8E4M3);
      const std::vector<double> qw = quantize_all(values(w), sw, kF8E4M3);
      const std::vector<double> qg = quantize_all(values(g), sg, g_fmt);
      // The f32 reciprocals the kernels use.
      const double fx = static_cast<double>(1.0f / sx), fw = static_cast<double>(1.0f / sw),
                   fg = static_cast<double>(1.0f / sg);
      const std::vector<double> bias_bf16 = values(b.to(kBF16));
      // y's rounding to bf16 happened after the bias add: widen u_out by |b| through 2 u_bf16.
      {
        const double u32 = 0x1p-24, gamma = c.k * u32 / (1 - c.k * u32);
        const std::vector<double> yv = values(y);
        int64_t outside = 0;
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < c.n; ++j) {
            double dot = 0, abs_dot = 0;
            for (int64_t r = 0; r < c.k; ++r) {
              const double p = qx[static_cast<size_t>(i * c.k + r)] * qw[static_cast<size_t>(j * c.k + r)];
              dot += p;
              abs_dot += std::fabs(p);
            }
            const double bj = bias_bf16[static_cast<size_t>(j)];
            const double ref = fx * fw * dot + bj, e = gamma * fx * fw * abs_dot;
            const double inner = e + 3 * u32 * (std::fabs(ref) + std::fabs(bj) + e);
            const double bound = inner + 0x1p-8 * (std::fabs(ref) + inner);
            outside += std::fabs(yv[static_cast<size_t>(i * c.n + j)] - ref) > bound;
          }
        }
        CHECK(outside == 0);
      }
      // dX [M, K] = s_g s_w qg [M, N] @ qw [N, K]: reduction over N.
      CHECK(outside_bound(values(x.grad()), qg, transpose(qw, c.n, c.k), c.m, c.k, c.n, fg * fw,
                          unit_roundoff(c.x_dtype)) == 0);
      // dW [N, K] = s_g s_x qg^T [N, M] @ qx [M, K]: reduction over M (padded to 16 with zeros).
      CHECK(outside_bound(values(w.grad()), transpose(qg, c.m, c.n), transpose(qx, c.m, c.k), c.n, c.k, c.m, fg * fx,
                          0x1p-24) == 0);
      // db = the f32 column sum of dy: |db - sum| <= gamma(M) sum |dy|.
      const std::vector<double> gv = values(g), db = values(b.grad());
      const double gamma_m = c.m * 0x1p-24 / (1 - c.m * 0x1p-24);
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t i = 0; i < c.m; ++i) {
          sum += gv[static_cast<size_t>(i * c.n + j)];
          abs_sum += std::fabs(gv[static_cast<size_t>(i * c.n + j)]);
        }
        CHECK(std::fabs(db[static_cast<size_t>(j)] - sum) <= gamma_m * abs_sum);
      }
      // And against the unquantised product, loosely: fp8 keeps 3 (E4M3) or 2 (E5M2) fraction bits,
      // so the relative error of the whole dX stays within a few times 2^-4 + 2^-3.
      const Tensor dx_exact = hg::matmul(g.to(kF64), w.detach().to(kF64));
      const std::vector<double> want = values(dx_exact), got = values(x.grad());
      double num = 0, den = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
      }
      CHECK(std::sqrt(num / den) < 0.25);
    }
  }
}

TEST_CASE("fp8_linear backward: amax = 0, non-finite gradients stay visible, bad inputs", "[amp][fp8][backward]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    amp::Fp8State st(1, {.amax_history_len = 4}, dev);
    const Tensor x = zeros({5, 32}, {.device = dev}).requires_grad_();
    const Tensor w = make_input({16, 32}, kF32, Domain::kAny, 7).to(dev).requires_grad_();
    const Tensor y = amp::fp8_linear(x, w, Tensor(), st, 0, kF32);
    CHECK(values(y) == std::vector<double>(80, 0.0));
    y.backward(zeros({5, 16}, {.device = dev}));
    CHECK(values(x.grad()) == std::vector<double>(160, 0.0));
    CHECK(values(w.grad()) == std::vector<double>(512, 0.0));
    CHECK(scalar(st.amax(0, amp::Fp8Role::input)) == 0.0f);
    st.update();
    CHECK(scalar(st.scale(0, amp::Fp8Role::input)) == 1.0f);  // amax 0 keeps the scale
    CHECK(scalar(st.scale(0, amp::Fp8Role::weight)) == 448.0f / amax_host(w.detach()));
    // An inf in the output gradient (a loss scale too large) reaches dX and dW as non-finite values,
    // where the GradScaler's check finds it; clipping it at 57344 would hide the overflow.
    const Tensor x2 = make_input({5, 32}, kF32, Domain::kAny, 8).to(dev).requires_grad_();
    const Tensor y2 = amp::fp8_linear(x2, w, Tensor(), st, 0, kF32);
    std::vector<float> gv(80, 1.0f);
    gv[17] = std::numeric_limits<float>::infinity();
    y2.backward(from_vector(gv, {5, 16}).to(dev));
    bool dx_nonfinite = false, dw_nonfinite = false;
    for (double v : values(x2.grad())) dx_nonfinite = dx_nonfinite || !std::isfinite(v);
    for (double v : values(w.grad())) dw_nonfinite = dw_nonfinite || !std::isfinite(v);
    CHECK(dx_nonfinite);
    CHECK(dw_nonfinite);
    CHECK_THROWS_WITH(
        amp::fp8_linear(zeros({2, 20}, {.device = dev}), zeros({16, 20}, {.device = dev}), Tensor(), st, 0, kF32),
        Contains("multiples of 16"));
    CHECK_THROWS_WITH(
        amp::fp8_linear(zeros({2, 16}, {.device = dev}), zeros({16, 32}, {.device = dev}), Tensor(), st, 0, kF32),
        Contains("weight [N, K]"));
  }
}

namespace {

// Transformer Engine's delayed scaling, written from its documentation:
// amax = max over the history window (or the newest entry), scale =
// fp8_max / amax / 2^margin, kept when amax is 0 or not finite; the history
// rolls after each update; an overflow step (found_inf) changes nothing.
struct TeReference {
  int64_t length, n;
  double margin_factor;
  bool most_recent;
  std::vector<std::vector<float>> history;  // [length][n], row 0 the newest
  std::vector<float> scale;
  std::vector<float> fp8_max;

  void update(const std::vector<float>& row0, bool found_inf) {
    if (found_inf) return;
    history[0] = row0;
    for (int64_t s = 0; s < n; ++s) {
      float amax = history[0][static_cast<size_t>(s)];
      if (!most_recent) {
        for (int64_t r = 1; r < length; ++r)
          amax = std::max(amax, history[static_cast<size_t>(r)][static_cast<size_t>(s)]);
      }
      if (amax > 0 && std::isfinite(amax)) {
        float v = (fp8_max[static_cast<size_t>(s)] / amax) / static_cast<float>(margin_factor);
        if (!std::isfinite(v)) v = std::numeric_limits<float>::max();
        scale[static_cast<size_t>(s)] = v;
      }
    }
    std::rotate(history.begin(), history.begin() + 1, history.end());  // row 0 -> the last row
    history[0].assign(static_cast<size_t>(n), 0.0f);
  }
};

}  // namespace

TEST_CASE("fp8 delayed scaling through training steps follows Transformer Engine's formula step by step",
          "[amp][fp8][recipe]") {
  for (const Device dev : devices()) {
    for (const bool most_recent : {false, true}) {
      for (const int margin : {0, 2}) {
        INFO(dev.str() << (most_recent ? " most recent" : " max") << " margin " << margin);
        const int64_t length = 4;
        amp::Fp8State st(2,
                         {.format = amp::Fp8Format::hybrid,
                          .amax_history_len = length,
                          .margin = margin,
                          .amax_compute = most_recent ? Fp8AmaxCompute::kMostRecent : Fp8AmaxCompute::kMax},
                         dev);
        TeReference ref{length, 6, std::ldexp(1.0, margin), most_recent, {}, std::vector<float>(6, 1.0f), {}};
        ref.history.assign(static_cast<size_t>(length), std::vector<float>(6, 0.0f));
        for (int l = 0; l < 2; ++l) ref.fp8_max.insert(ref.fp8_max.end(), {448.0f, 448.0f, 57344.0f});
        const Tensor w0 = make_input({32, 16}, kF32, Domain::kAny, 1).to(dev).requires_grad_();
        const Tensor w1 = make_input({16, 32}, kF32, Domain::kAny, 2).to(dev).requires_grad_();
        for (int step = 0; step < 9; ++step) {
          INFO("step " << step);
          // Magnitudes that rise and fall, so the window's max and the newest entry differ.
          const double mag = std::ldexp(1.0, (step * 5) % 7 - 3);
          const Tensor x =
              ops::binary_scalar(OpId::mul, make_input({6, 16}, kF32, Domain::kAny, 10 + step), mag).to(dev);
          const Tensor h = amp::fp8_linear(x, w0, Tensor(), st, 0, kF32);
          const Tensor y = amp::fp8_linear(h, w1, Tensor(), st, 1, kF32);
          const Tensor gy =
              ops::binary_scalar(OpId::mul, make_input({6, 16}, kF32, Domain::kAny, 40 + step), 1.0 / mag).to(dev);
          y.backward(gy);
          // The recorded amaxes: inputs and weights against max |.| computed here.
          const std::vector<float> row0 = floats(st.history().select(0, 0));
          CHECK(row0[0] == amax_host(x));
          CHECK(row0[1] == amax_host(w0.detach()));
          CHECK(row0[3] == amax_host(h.detach()));
          CHECK(row0[4] == amax_host(w1.detach()));
          CHECK(row0[5] == amax_host(gy));
          CHECK(row0[2] > 0.0f);  // layer 0's output gradient (an fp8 GEMM's result): read from the state
          const bool overflow = step == 4 || step == 5;
          const Tensor before = st.history().clone();
          const Tensor scale_before = st.scales().clone();
          st.update(from_vector(std::vector<float>{overflow ? 1.0f : 0.0f}).to(dev));
          ref.update(row0, overflow);
          if (overflow) {  // nothing moved, on the device
            CHECK(same_bits(st.history(), before));
            CHECK(same_bits(st.scales(), scale_before));
            continue;
          }
          const std::vector<float> got_scale = floats(st.scales()), got_inv = floats(st.scale_invs());
          for (size_t s = 0; s < 6; ++s) {
            INFO("slot " << s);
            CHECK(got_scale[s] == ref.scale[s]);
            CHECK(got_inv[s] == 1.0f / ref.scale[s]);
          }
          const std::vector<float> hist = floats(st.history());
          for (int64_t r = 0; r < length; ++r) {
            for (size_t s = 0; s < 6; ++s)
              CHECK(hist[static_cast<size_t>(r) * 6 + s] == ref.history[static_cast<size_t>(r)][s]);
          }
        }
      }
    }
  }
}

TEST_CASE("Fp8Training: eligible Linears run in fp8 inside Fp8Autocast, the filter and the rules keep the rest",
          "[amp][fp8][routing]") {
  Generator gen(1);
  auto model =
      std::make_shared<nn::Sequential>(nn::Linear(32, 48, true, &gen), nn::ReLU(), nn::Linear(48, 64, true, &gen),
                                       nn::ReLU(), nn::Linear(64, 10, true, &gen));
  const Tensor x = make_input({3, 32}, kF32, Domain::kAny, 5);
  const Tensor plain = model->forward(x);
  {
    amp::Fp8Training fp8(*model, Device::cpu(), {.amax_history_len = 4}, amp::keep_layers({"0"}));
    CHECK(fp8.layers() == std::vector<std::string>{"2"});
    REQUIRE(fp8.kept().size() == 2);
    CHECK(fp8.kept()[0].first == "0");
    CHECK(fp8.kept()[0].second == "kept by the filter");
    CHECK(fp8.kept()[1].first == "4");
    CHECK_THAT(fp8.kept()[1].second, Contains("not multiples of 16"));
    CHECK_THAT(fp8.summary(), Contains("fp8: 1 Linear layer"));
    CHECK(same_bits(model->forward(x), plain));  // outside the region: the ordinary path
    Tensor routed;
    {
      amp::Fp8Autocast region;
      CHECK(amp::is_fp8_autocast_enabled());
      routed = model->forward(x);
    }
    CHECK_FALSE(amp::is_fp8_autocast_enabled());
    // The same by hand: layer "2" through fp8_linear_forward with a fresh state of the same recipe.
    auto* l0 = dynamic_cast<nn::Linear*>((*model)[0].get());
    auto* l2 = dynamic_cast<nn::Linear*>((*model)[2].get());
    auto* l4 = dynamic_cast<nn::Linear*>((*model)[4].get());
    amp::Fp8State ref(1, {.amax_history_len = 4}, Device::cpu());
    Tensor want;
    {
      hg::NoGradGuard no_grad;
      const Tensor h1 = hg::relu(hg::linear(x, l0->weight, l0->bias));
      const Tensor h2 = hg::relu(amp::fp8_linear_forward(h1, l2->weight, l2->bias, ref, 0, kF32));
      want = hg::linear(h2, l4->weight, l4->bias);
    }
    CHECK(same_bits(routed, want));
    CHECK_FALSE(same_bits(routed, plain));
    // Inside Autocast(kBF16) the routed layer gives bf16, the rest follows the autocast policy.
    {
      amp::Autocast autocast(kBF16);
      amp::Fp8Autocast region;
      CHECK(l2->forward(make_input({3, 48}, kF32, Domain::kAny, 6)).dtype() == kBF16);
    }
    CHECK_THROWS_WITH(amp::Fp8Training(*model, Device::cpu()), Contains("already has a route"));
  }
  // The destructor removed the routes.
  amp::Fp8Autocast region;
  CHECK(same_bits(model->forward(x), plain));
}

TEST_CASE("fp8 saturation counts per layer and role, on the device", "[amp][fp8][saturation]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    auto model = std::make_shared<nn::Sequential>(nn::Linear(16, 16), nn::Linear(16, 32));
    model->to(dev);
    amp::Fp8Training fp8(*model, dev, {.amax_history_len = 2});
    std::vector<float> xv(2 * 16, 0.5f);
    xv[3] = 500.0f;  // the scales start at 1: |x| > 464 (448 + half an ulp) clips in E4M3
    xv[7] = -1000.0f;
    xv[20] = 470.0f;
    xv[21] = 460.0f;  // rounds to 448: not clipped
    const Tensor x = from_vector(xv, {2, 16}).to(dev);
    Tensor y;
    {
      amp::Fp8Autocast region;
      y = model->forward(x);
    }
    std::vector<float> gv(2 * 32, 1.0f);
    gv[0] = 62000.0f;  // beyond E5M2's 57344 + half an ulp (61440)
    gv[1] = 60000.0f;  // rounds to 57344: not clipped
    gv[33] = -1e6f;
    y.backward(from_vector(gv, {2, 32}).to(dev));
    const std::vector<amp::Fp8LayerSaturation> sat = fp8.saturation();
    REQUIRE(sat.size() == 2);
    CHECK(sat[0].layer == "0");
    CHECK(sat[0].input == 3);
    CHECK(sat[0].weight == 0);
    CHECK(sat[1].grad_output == 2);
    CHECK(fp8.state().saturation_counts()[3 + 2] == 2);
    fp8.state().reset_saturation_counts();
    CHECK(fp8.state().saturation_counts() == std::vector<int64_t>(6, 0));
    // Current scaling maps each tensor's amax onto the max: nothing clips.
    amp::Fp8State cur(1, {.scaling = amp::Fp8Scaling::current}, dev);
    (void)cur.cast(make_input({64, 48}, kF32, Domain::kAny, 9).to(dev), 0, amp::Fp8Role::input);
    (void)cur.cast(make_input({64, 48}, kBF16, Domain::kAny, 10).to(dev), 0, amp::Fp8Role::grad_output);
    CHECK(cur.saturation_counts() == std::vector<int64_t>(3, 0));
  }
}

namespace {

// A two-layer MLP trained with AdamW, a GradScaler and fp8 (delayed scaling),
// one overflow injected at step `overflow_step` (an inf in the input).
struct Fp8Run {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  amp::GradScaler scaler{amp::GradScalerOptions{}.set_init_scale(1024.0).set_growth_interval(2)};
  std::unique_ptr<amp::Fp8Training> fp8;
  Device dev;

  explicit Fp8Run(Device device) : dev(device) {
    Generator gen(5);
    model =
        std::make_shared<nn::Sequential>(nn::Linear(32, 64, true, &gen), nn::GELU(), nn::Linear(64, 16, true, &gen));
    model->to(dev);
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{}.set_lr(1e-2));
    fp8 = std::make_unique<amp::Fp8Training>(*model, dev, amp::Fp8Recipe{.amax_history_len = 3});
  }

  static std::pair<Tensor, Tensor> batch(int step, Device dev) {
    std::vector<float> xv = floats(make_input({8, 32}, kF32, Domain::kAny, 100 + static_cast<uint64_t>(step)));
    if (step == 4) xv[5] = std::numeric_limits<float>::infinity();
    return {from_vector(xv, {8, 32}).to(dev), make_input({8, 16}, kF32, Domain::kAny, 200 + step).to(dev)};
  }

  void step(const Tensor& x, const Tensor& target) {
    opt->zero_grad();
    Tensor loss;
    {
      amp::Autocast autocast(kBF16);
      amp::Fp8Autocast region;
      const Tensor d = hg::to(model->forward(x), kF32) - target;
      loss = hg::mean(d * d);
    }
    scaler.scale(loss).backward();
    scaler.step(*opt);
    fp8->update(scaler);
    scaler.update();
  }
};

nn::NamedTensors cloned(const nn::NamedTensors& s) {
  nn::NamedTensors out;
  for (const auto& [name, t] : s) out.emplace_back(name, t.defined() ? t.clone() : t);
  return out;
}

}  // namespace

TEST_CASE("fp8 state in checkpoints: save, load into a fresh run, continue bit for bit", "[amp][fp8][resume]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    Fp8Run whole(dev);
    for (int s = 0; s < 7; ++s) {
      auto [x, y] = Fp8Run::batch(s, dev);
      whole.step(x, y);
    }
    Fp8Run first(dev);
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = Fp8Run::batch(s, dev);
      first.step(x, y);
    }
    const nn::NamedTensors model_state = cloned(first.model->state_dict()), opt_state = cloned(first.opt->state_dict()),
                           scaler_state = cloned(first.scaler.state_dict()), fp8_state = first.fp8->state_dict();
    Fp8Run second(dev);
    second.model->load_state_dict(model_state);
    second.opt->load_state_dict(opt_state);
    second.scaler.load_state_dict(scaler_state);
    second.fp8->load_state_dict(fp8_state);
    for (int s = 3; s < 7; ++s) {
      auto [x, y] = Fp8Run::batch(s, dev);
      second.step(x, y);
    }
    CHECK(whole.scaler.stats().steps_skipped == 1);  // the injected overflow
    const nn::NamedTensors a = whole.model->state_dict(), b = second.model->state_dict();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(same_bits(a[i].second, b[i].second));
    }
    const auto fa = whole.fp8->state_dict(), fb = second.fp8->state_dict();
    for (size_t i = 0; i + 1 < fa.size(); ++i) {  // the last entry is the recipe
      INFO(fa[i].first);
      CHECK(same_bits(fa[i].second, fb[i].second));
    }
    // A state of another recipe or size is refused, naming the difference.
    amp::Fp8State other(2, {.amax_history_len = 5}, dev);
    CHECK_THROWS_WITH(other.load_state_dict(first.fp8->state().state_dict()), Contains("another fp8 recipe"));
    amp::Fp8State wrong_size(3, {.amax_history_len = 3}, dev);
    CHECK_THROWS_WITH(wrong_size.load_state_dict(first.fp8->state().state_dict()), Contains("fp8 layers"));
  }
}

#if defined(HG_WITH_CUDA)
TEST_CASE("fp8 training steps make no host read or sync (cuda-emu counter)", "[amp][fp8][sync]") {
  const Device dev = Device::cuda(0);
  Fp8Run run(dev);
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int s = 0; s < 4; ++s) batches.push_back(Fp8Run::batch(s == 3 ? 4 : s, dev));  // the last one overflows
  run.step(batches[0].first, batches[0].second);  // first use: optimizer and scaler state
  cuda::synchronize(0);
  const cuda::HostSyncCounts before = cuda::host_sync_counts();
  for (int s = 1; s < 4; ++s) run.step(batches[static_cast<size_t>(s)].first, batches[static_cast<size_t>(s)].second);
  const cuda::HostSyncCounts after = cuda::host_sync_counts();
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.synchronizations == before.synchronizations);
  CHECK(run.scaler.stats().steps_skipped == 1);
}
#endif

namespace {

// A synthetic character corpus with structure a small GPT learns within a
// few hundred steps: words from a fixed list, each chosen from the previous
// one by a seeded table, separated by spaces and periods.
std::vector<int64_t> synthetic_corpus(size_t length, int64_t* vocab) {
  const std::vector<std::string> words = {"the", "fox", "runs", "over", "a",   "lazy", "dog", "and",
                                          "cat", "sat", "on",   "mat",  "big", "red",  "hen", "eats"};
  std::string text;
  uint64_t state = 12345;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  size_t w = 0;
  while (text.size() < length) {
    text += words[w];
    text += next() % 7 == 0 ? ". " : " ";
    w = (w * 5 + 3 + next() % 3) % words.size();  // mostly determined by the previous word
  }
  text.resize(length);
  std::vector<int64_t> alphabet(256, -1);
  int64_t n = 0;
  for (unsigned char c : text) {
    if (alphabet[c] < 0) alphabet[c] = n++;
  }
  *vocab = n;
  std::vector<int64_t> tokens;
  for (unsigned char c : text) tokens.push_back(alphabet[c]);
  return tokens;
}

struct GptRunResult {
  double val_loss = 0;
  double seconds = 0;
};

GptRunResult train_char_gpt(bool fp8, int64_t steps) {
  int64_t vocab = 0;
  const std::vector<int64_t> tokens = synthetic_corpus(60000, &vocab);
  const int64_t block = 32, batch = 8;
  const auto split = static_cast<int64_t>(tokens.size() * 9 / 10);
  Generator gen(7);
  auto model = std::make_shared<nn::GPT>(
      nn::GPTConfig{.n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = block, .vocab_size = vocab}, &gen);
  auto opt = model->configure_optimizers(0.1, 3e-3, 0.9, 0.99);
  std::unique_ptr<amp::Fp8Training> f8;
  if (fp8) f8 = std::make_unique<amp::Fp8Training>(*model, Device::cpu(), amp::Fp8Recipe{.amax_history_len = 16});
  auto windows = [&](int64_t from, int64_t to, int64_t count, uint64_t seed, bool fixed) {
    std::vector<int64_t> xs, ys;
    uint64_t s = seed;
    for (int64_t b = 0; b < count; ++b) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      const int64_t span = to - from - block - 1;
      const int64_t start =
          from + (fixed ? b * span / count : static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(span)));
      for (int64_t t = 0; t < block; ++t) {
        xs.push_back(tokens[static_cast<size_t>(start + t)]);
        ys.push_back(tokens[static_cast<size_t>(start + t + 1)]);
      }
    }
    return std::make_pair(from_vector(xs, {count, block}), from_vector(ys, {count, block}));
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    auto [x, y] = windows(0, split, batch, 1000 + static_cast<uint64_t>(step), false);
    opt->zero_grad();
    Tensor loss;
    {
      amp::Autocast autocast(kBF16);
      amp::Fp8Autocast region(fp8);
      loss = model->loss(x, y);
    }
    loss.backward();
    opt->step();
    if (f8) f8->update();
  }
  GptRunResult r;
  {
    hg::NoGradGuard no_grad;
    amp::Autocast autocast(kBF16);
    amp::Fp8Autocast region(fp8);
    auto [x, y] = windows(split, static_cast<int64_t>(tokens.size()), 32, 0, true);
    r.val_loss = static_cast<double>(model->loss(x, y).to(kF32).item<float>());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (f8) {
    CHECK(f8->layers().size() ==
          8);  // c_attn, attn.c_proj, c_fc, mlp.c_proj per block; the tied lm_head is not a Linear
  }
  return r;
}

}  // namespace

TEST_CASE("char-level GPT with its Linear layers in fp8 (emulated) trains like amp-bf16", "[amp][fp8][train]") {
  // Same data, init and batches; the fp8 run (E4M3 forward, E5M2 gradients,
  // delayed scaling) must reach the bf16 run's validation loss within 0.05.
  const int64_t steps = 300;
  // One thread: the model is small (M = 256 rows), and OpenMP's spinning
  // threads only cost time on a shared machine.
  struct OneThread {
    int saved = get_num_threads();
    OneThread() { set_num_threads(1); }
    ~OneThread() { set_num_threads(saved); }
  } one_thread;
  const GptRunResult bf16 = train_char_gpt(false, steps);
  const GptRunResult f8 = train_char_gpt(true, steps);
  INFO("val loss amp-bf16 " << bf16.val_loss << " (" << bf16.seconds << " s), amp-fp8 " << f8.val_loss << " ("
                            << f8.seconds << " s)");
  WARN("char GPT " << steps << " steps: val loss amp-bf16 " << bf16.val_loss << " (" << bf16.seconds << " s), amp-fp8 "
                   << f8.val_loss << " (" << f8.seconds << " s)");
  CHECK(bf16.val_loss < 2.0);  // it learned something (uniform over the alphabet is ~3.3)
  CHECK(std::fabs(f8.val_loss - bf16.val_loss) <= 0.05);
}
