// The sequence-model building blocks of kernels/norm.h and kernels/index.h
// and their autograd (autograd/functions_norm_index.cpp): LayerNorm and
// RMSNorm forward/backward against an f64 reference on every device and
// dtype, the embedding (padding_idx, deterministic backward, out-of-range
// indices), gathers/scatters/shape ops, softmax over any dim, gradcheck (f64)
// of every new differentiable op, and member views recording autograd.
// References are computed in double from the already-rounded inputs;
// tolerances come from tests/kernels/tolerance.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "kernels/index.h"
#include "kernels/norm.h"
#include "nn/layers.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/device_error.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

using V = const std::vector<Tensor>&;

// y = layer_norm / rms_norm of each row of `cols` values, in double.
std::vector<double> norm_ref(const std::vector<double>& x, int64_t cols, const std::vector<double>& w,
                             const std::vector<double>& b, double eps, bool rms) {
  std::vector<double> y(x.size());
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(cols)) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t c = 0; c < cols; ++c) mean += x[base + c];
      mean /= static_cast<double>(cols);
    }
    for (int64_t c = 0; c < cols; ++c) var += (x[base + c] - mean) * (x[base + c] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (x[base + c] - mean) * rstd;
      if (!w.empty()) v *= w[c];
      if (!b.empty()) v += b[c];
      y[base + c] = v;
    }
  }
  return y;
}

Tensor int_tensor(const std::vector<int64_t>& v, const Shape& shape, Device device) {
  return from_vector(v, shape, {.dtype = kI64}).to(device);
}

// Two tensors hold the same bits.
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  if (x.sizes() != y.sizes() || x.dtype() != y.dtype()) return false;
  const std::vector<double> u = x.to_vector<double>(), v = y.to_vector<double>();
  return std::memcmp(u.data(), v.data(), u.size() * sizeof(double)) == 0;
}

}  // namespace

// ---- LayerNorm / RMSNorm ---------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm forward match the f64 reference", "[kernels][norm]") {
  struct Case {
    int64_t rows, cols;
  };
  const std::vector<Case> cases{{3, 1}, {5, 31}, {4, 768}, {2, 4096}, {2, 50257}};
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const Case& c : cases) {
        for (bool rms : {false, true}) {
          for (bool f32_params : {false, true}) {
            if (f32_params && (dtype == kF32 || dtype == kF64)) continue;
            const DType pdt = f32_params ? kF32 : dtype;
            const Tensor x = make_input({c.rows, c.cols}, dtype, Domain::kAny, 3).to(dev);
            const Tensor w = make_input({c.cols}, pdt, Domain::kAny, 4).to(dev);
            const Tensor b = make_input({c.cols}, pdt, Domain::kAny, 5).to(dev);
            const double eps = 1e-5;
            ops::NormForward f = rms ? ops::rms_norm(x, {c.cols}, w, eps) : ops::layer_norm(x, {c.cols}, w, b, eps);
            const std::vector<double> ref =
                norm_ref(values_of(x), c.cols, values_of(w), rms ? std::vector<double>{} : values_of(b), eps, rms);
            INFO(label(dev, dtype,
                       (rms ? "rms_norm cols " : "layer_norm cols ") + std::to_string(c.cols) +
                           (f32_params ? " f32 params" : "")));
            CHECK(f.y.dtype() == dtype);
            CHECK(f.rstd.dtype() == (dtype == kF64 ? kF64 : kF32));
            CHECK(compare_values(values_of(f.y), round_to(ref, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("layer_norm and rms_norm backward match the f64 CPU gradients", "[kernels][norm][autograd]") {
  // The f64 CPU gradients are checked against finite differences below; here
  // every device and dtype reproduces them from the same rounded inputs.
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kF16, kBF16}) {
      for (int64_t cols : {1, 31, 768}) {
        for (bool rms : {false, true}) {
          const int64_t rows = 6;
          auto run = [&](DType dt, Device d) {
            Tensor x = make_input({rows, cols}, dtype, Domain::kAny, 7).to(dt).to(d).requires_grad_(true);
            Tensor w = make_input({cols}, dtype, Domain::kAny, 8).to(dt).to(d).requires_grad_(true);
            Tensor b = make_input({cols}, dtype, Domain::kAny, 9).to(dt).to(d).requires_grad_(true);
            const Tensor dy = make_input({rows, cols}, dtype, Domain::kAny, 10).to(dt).to(d);
            Tensor y = rms ? hg::rms_norm(x, {cols}, w, 1e-5) : hg::layer_norm(x, {cols}, w, b, 1e-5);
            y.backward(dy);
            std::vector<std::vector<double>> g{values_of(x.grad()), values_of(w.grad())};
            if (!rms) g.push_back(values_of(b.grad()));
            return g;
          };
          const auto ref = run(kF64, Device::cpu());
          const auto got = run(dtype, dev);
          INFO(label(dev, dtype, (rms ? "rms_norm cols " : "layer_norm cols ") + std::to_string(cols)));
          // d_x cancels (g - mean(g) - xhat * mean(g xhat)): judge it on the row's scale.
          Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
          for (size_t i = 0; i < got.size(); ++i) {
            double scale = 1;
            for (double v : ref[i]) scale = std::max(scale, std::fabs(v));
            INFO("gradient " << i);
            CHECK(compare_values(got[i], round_to(ref[i], dtype), {tol.rtol, tol.atol + tol.rtol * scale}) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("norm parameter gradients are bit-identical from run to run", "[kernels][norm]") {
  for (Device dev : test_devices()) {
    const int64_t rows = 700, cols = 96;  // several row chunks
    const Tensor x = make_input({rows, cols}, kF32, Domain::kAny, 1).to(dev);
    const Tensor w = make_input({cols}, kF32, Domain::kAny, 2).to(dev);
    const Tensor dy = make_input({rows, cols}, kF32, Domain::kAny, 3).to(dev);
    const ops::NormForward f = ops::layer_norm(x, {cols}, w, Tensor(), 1e-5);
    const ops::NormBackward a = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    const ops::NormBackward b = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    INFO(dev.str());
    CHECK(same_bits(a.d_weight, b.d_weight));
    CHECK(same_bits(a.d_bias, b.d_bias));
    CHECK(same_bits(a.d_x, b.d_x));
  }
}

TEST_CASE("norm bad input names the shapes", "[kernels][norm]") {
  const Tensor x = zeros({2, 5});
  CHECK_THROWS_AS(ops::layer_norm(x, {4}, Tensor(), Tensor()), Error);
  CHECK_THROWS_WITH(ops::layer_norm(x, {4}, Tensor(), Tensor()), Contains("[2, 5]"));
  CHECK_THROWS_WITH(ops::layer_norm(x, {5}, zeros({4}), Tensor()), Contains("[4]"));
}

// ---- embedding -------------------------------------------------------------------------------

TEST_CASE("embedding forward, padding_idx backward and out-of-range indices", "[kernels][embedding]") {
  const int64_t num = 10, dim = 5;
  const std::vector<int64_t> idx{3, 2, 3, 9, 0, 3};
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(dev, dtype, "embedding"));
      Tensor w = make_input({num, dim}, dtype, Domain::kAny, 21).to(dev).requires_grad_(true);
      const Tensor tokens = int_tensor(idx, {2, 3}, dev);
      Tensor y = hg::embedding(tokens, w, /*padding_idx=*/2);
      REQUIRE(y.sizes() == Shape{2, 3, dim});
      const std::vector<double> wv = values_of(w), yv = values_of(y);
      std::vector<double> want;
      for (int64_t t : idx) want.insert(want.end(), wv.begin() + t * dim, wv.begin() + (t + 1) * dim);
      CHECK(yv == want);  // a gather is exact
      const Tensor dy = make_input({2, 3, dim}, dtype, Domain::kAny, 22).to(dev);
      y.backward(dy);
      const std::vector<double> dyv = values_of(dy);
      std::vector<double> dw(static_cast<size_t>(num * dim), 0.0);
      for (size_t k = 0; k < idx.size(); ++k) {
        if (idx[k] == 2) continue;  // padding_idx gets no gradient
        for (int64_t c = 0; c < dim; ++c) dw[idx[k] * dim + c] += dyv[k * dim + c];
      }
      CHECK(compare_values(values_of(w.grad()), round_to(dw, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
    }
    const Tensor w = zeros({num, dim}, {.device = dev});
    const Tensor bad = int_tensor({1, 12, 0}, {3}, dev);
    if (dev.is_cpu()) {
      CHECK_THROWS_WITH(hg::embedding(bad, w), Contains("embedding") && Contains("12"));
      CHECK_THROWS_WITH(hg::embedding(int_tensor({-1}, {1}, dev), w), Contains("-1"));
    } else {
#if defined(HG_WITH_CUDA)
      // Reported through the device error flag at the next sync point.
      CHECK_THROWS_WITH(hg::embedding(bad, w).to(Device::cpu()), Contains("embedding") && Contains("12"));
      CHECK_NOTHROW(hg::cuda::check_device_errors());
#endif
    }
    CHECK_THROWS_WITH(hg::embedding(from_vector(std::vector<double>{1.0}).to(dev), w), Contains("i64 or i32"));
  }
}

TEST_CASE("embedding backward is deterministic (same bits, two runs)", "[kernels][embedding]") {
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kF16}) {
      const int64_t num = 50, n = 4096, dim = 64;
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) idx[i] = (i * 7919) % 13 == 0 ? 1 : (i * 31) % num;  // many repeats
      const Tensor tokens = int_tensor(idx, {n}, dev);
      const Tensor dy = make_input({n, dim}, dtype, Domain::kAny, 5).to(dev);
      const Tensor a = ops::embedding_backward(dy, tokens, num);
      const Tensor b = ops::embedding_backward(dy, tokens, num);
      INFO(label(dev, dtype, "embedding_backward"));
      CHECK(same_bits(a, b));
      // and the CUDA backend sums in the CPU backend's order: the same bits
      if (!dev.is_cpu())
        CHECK(same_bits(a, ops::embedding_backward(dy.to(Device::cpu()), tokens.to(Device::cpu()), num)));
    }
  }
}

// ---- indexing and shape ops ------------------------------------------------------------------

TEST_CASE("index_select, gather, scatter_add, cat, stack, masked_fill, tril, triu match references",
          "[kernels][index]") {
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(dev, dtype, "index ops"));
      const Tensor x = make_input({3, 4}, dtype, Domain::kAny, 31).to(dev);
      const std::vector<double> xv = values_of(x);
      // index_select on dim 1: x[:, [3, 0, 3]]
      {
        const std::vector<double> y = values_of(hg::index_select(x, 1, int_tensor({3, 0, 3}, {3}, dev)));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int k : {3, 0, 3}) want.push_back(xv[r * 4 + k]);
        }
        CHECK(y == want);
      }
      // gather on dim 1 with index [[1, 1], [0, 3], [2, 0]]
      const std::vector<int64_t> gi{1, 1, 0, 3, 2, 0};
      {
        const std::vector<double> y = values_of(hg::gather(x, 1, int_tensor(gi, {3, 2}, dev)));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int k = 0; k < 2; ++k) want.push_back(xv[r * 4 + gi[r * 2 + k]]);
        }
        CHECK(y == want);
      }
      // scatter_add on dim 1 of src [3, 2] into x
      {
        const Tensor src = make_input({3, 2}, dtype, Domain::kAny, 32).to(dev);
        const std::vector<double> sv = values_of(src);
        std::vector<double> want = xv;
        for (int r = 0; r < 3; ++r) {
          for (int k = 0; k < 2; ++k) want[r * 4 + gi[r * 2 + k]] += sv[r * 2 + k];
        }
        const Tensor y = hg::scatter_add(x, 1, int_tensor(gi, {3, 2}, dev), src);
        CHECK(compare_values(values_of(y), round_to(want, dtype), tolerance_for(dtype, OpKind::kElementwise)) == "");
      }
      // cat on dim 1 and stack on dim 0, the second input non-contiguous
      {
        const Tensor b = make_noncontiguous(make_input({3, 2}, dtype, Domain::kAny, 33).to(dev));
        const std::vector<double> bv = values_of(b);
        const std::vector<double> y = values_of(hg::cat({x, b}, 1));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int c = 0; c < 4; ++c) want.push_back(xv[r * 4 + c]);
          for (int c = 0; c < 2; ++c) want.push_back(bv[r * 2 + c]);
        }
        CHECK(y == want);
        const Tensor s = hg::stack({x, x}, 0);
        CHECK(s.sizes() == Shape{2, 3, 4});
        std::vector<double> twice = xv;
        twice.insert(twice.end(), xv.begin(), xv.end());
        CHECK(values_of(s) == twice);
        CHECK_THROWS_WITH(hg::cat({x, zeros({2, 2}, {.dtype = dtype, .device = dev})}, 1),
                          Contains("[3, 4]") && Contains("[2, 2]"));
      }
      // masked_fill with a broadcast [1, 4] mask; tril/triu with offsets
      {
        const Tensor mask = from_vector(std::vector<double>{1, 0, 0, 1}, {1, 4}).to(kBool).to(dev);
        const std::vector<double> y = values_of(hg::masked_fill(x, mask, -7.0));
        std::vector<double> want = xv;
        for (int r = 0; r < 3; ++r) want[r * 4] = want[r * 4 + 3] = -7.0;
        CHECK(y == want);
        for (int64_t k : {-1, 0, 2}) {
          std::vector<double> lo = xv, hi = xv;
          for (int r = 0; r < 3; ++r) {
            for (int c = 0; c < 4; ++c) {
              if (c - r > k) lo[r * 4 + c] = 0;
              if (c - r < k) hi[r * 4 + c] = 0;
            }
          }
          CHECK(values_of(hg::tril(x, k)) == lo);
          CHECK(values_of(hg::triu(x, k)) == hi);
        }
      }
    }
    // out of range, on the CPU at once and on CUDA at the next sync
    const Tensor x = zeros({3, 4}, {.device = dev});
    if (dev.is_cpu()) {
      CHECK_THROWS_WITH(hg::index_select(x, 0, int_tensor({3}, {1}, dev)), Contains("index_select") && Contains("3"));
      CHECK_THROWS_WITH(hg::gather(x, 1, int_tensor({4, 0, 0}, {3, 1}, dev)), Contains("gather"));
    } else {
#if defined(HG_WITH_CUDA)
      CHECK_THROWS_WITH(hg::gather(x, 1, int_tensor({4, 0, 0}, {3, 1}, dev)).to(Device::cpu()), Contains("gather"));
      CHECK_NOTHROW(hg::cuda::check_device_errors());
#endif
    }
  }
}

TEST_CASE("split and chunk make views along the dim", "[kernels][index]") {
  const Tensor x = arange(0, 10, 1, {.dtype = kF32}).reshape({10, 1});
  const std::vector<Tensor> s = hg::split(x, 4, 0);
  REQUIRE(s.size() == 3);
  CHECK(s[2].sizes() == Shape{2, 1});
  CHECK(values_of(s[2]) == std::vector<double>{8, 9});
  const std::vector<Tensor> c = hg::chunk(x, 3, 0);
  REQUIRE(c.size() == 3);
  CHECK(c[0].size(0) == 4);
  CHECK(c[2].size(0) == 2);
  CHECK_THROWS_AS(hg::split_with_sizes(x, {3, 3}, 0), Error);
}

TEST_CASE("arange fills on the device", "[kernels][index]") {
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kI64, kF16}) {
      const Tensor t = arange(-2, 5, 0.5, {.dtype = dtype, .device = dev});
      std::vector<double> want;
      for (int i = 0; i < 14; ++i) want.push_back(-2 + 0.5 * i);
      INFO(label(dev, dtype, "arange"));
      CHECK(values_of(t) == round_to(want, dtype));
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

// ---- autograd --------------------------------------------------------------------------------

TEST_CASE("gradcheck passes for the sequence-model ops (f64, cpu)", "[autograd][gradcheck]") {
  struct Case {
    std::string name;
    std::vector<Shape> shapes;
    std::function<Tensor(V)> fn;
  };
  const Device cpu = Device::cpu();
  const Tensor idx = int_tensor({2, 0, 2, 1}, {4}, cpu);
  const Tensor gidx = int_tensor({1, 1, 0, 3, 2, 0}, {3, 2}, cpu);
  const Tensor mask = from_vector(std::vector<double>{1, 0, 0, 1}, {4}).to(kBool);
  const std::vector<Case> cases{
      {"layer_norm affine", {{3, 7}, {7}, {7}}, [](V x) { return hg::layer_norm(x[0], {7}, x[1], x[2], 1e-5); }},
      {"layer_norm 2 dims, no affine",
       {{2, 3, 4}},
       [](V x) {
         return hg::layer_norm(x[0], {3, 4});
       }},
      {"layer_norm cols 1", {{3, 1}, {1}, {1}}, [](V x) { return hg::layer_norm(x[0], {1}, x[1], x[2], 1e-5); }},
      {"rms_norm affine", {{3, 7}, {7}}, [](V x) { return hg::rms_norm(x[0], {7}, x[1], 1e-6); }},
      {"rms_norm of a transposed view", {{7, 3}}, [](V x) { return hg::rms_norm(x[0].t(), {7}); }},
      // (the padding row gets no gradient although the forward reads it, as in
      // torch, so finite differences disagree there by design; tested above)
      {"embedding",
       {{5, 3}},
       [idx](V x) {
         return hg::embedding(idx.reshape({2, 2}), x[0]);
       }},
      {"index_select dim 1", {{3, 4}}, [idx](V x) { return hg::index_select(x[0], 1, idx); }},
      {"gather dim 1", {{3, 4}}, [gidx](V x) { return hg::gather(x[0], 1, gidx); }},
      {"scatter_add", {{3, 4}, {3, 2}}, [gidx](V x) { return hg::scatter_add(x[0], 1, gidx, x[1]); }},
      {"cat dim 1",
       {{3, 4}, {3, 2}},
       [](V x) {
         return hg::cat({x[0], x[1] * 2.0}, 1);
       }},
      {"stack dim 2",
       {{3, 4}, {3, 4}},
       [](V x) {
         return hg::stack({x[0], x[1]}, 2);
       }},
      {"split",
       {{7, 3}},
       [](V x) {
         const auto parts = hg::split(x[0], 3, 0);
         return hg::cat({parts[2] * 3.0, parts[0]}, 0);
       }},
      {"chunk", {{4, 6}}, [](V x) { return hg::chunk(x[0], 2, 1)[1] * hg::chunk(x[0], 2, 1)[0]; }},
      {"masked_fill", {{3, 4}}, [mask](V x) { return hg::masked_fill(x[0], mask, 0.5); }},
      {"tril / triu", {{4, 5}}, [](V x) { return hg::tril(x[0], 1) + hg::triu(x[0], -1) * 2.0; }},
      {"softmax dim 0", {{3, 4, 5}}, [](V x) { return hg::softmax(x[0], 0); }},
      {"softmax dim 1", {{3, 4, 5}}, [](V x) { return hg::softmax(x[0], 1); }},
      {"log_softmax dim 1", {{3, 4, 5}}, [](V x) { return hg::log_softmax(x[0], -2); }},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> in;
    uint64_t seed = 51;
    for (const Shape& s : c.shapes) in.push_back(make_input(s, kF64, Domain::kAny, seed++).requires_grad_(true));
    INFO(c.name);
    CHECK(gradcheck(c.fn, in) == "");
  }
}

TEST_CASE("member views record autograd", "[autograd][views]") {
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_(true);
  hg::sum(w.view({6}) * 2.0).backward();
  REQUIRE(w.grad().defined());
  CHECK(values_of(w.grad()) == std::vector<double>(6, 2.0));
  // every member, chained, against finite differences
  const auto chain = [](V x) {
    Tensor y = x[0].t().reshape({3, 2}).permute({1, 0}).unsqueeze(0).squeeze(0).narrow(1, 1, 2).slice(0, 0, 2, 1);
    y = y.transpose(0, 1).flatten().unsqueeze(1).expand({4, 3}).select(1, 2);
    return y * y;
  };
  CHECK(gradcheck(chain, {make_input({2, 3}, kF64, Domain::kAny, 71).requires_grad_(true)}) == "");
  // no recording without grad mode
  Tensor p = ones({2, 3}).requires_grad_(true);
  {
    NoGradGuard guard;
    CHECK_FALSE(p.view({6}).requires_grad());
  }
  CHECK(p.view({6}).requires_grad());
}

// ---- layers ----------------------------------------------------------------------------------

TEST_CASE("nn::LayerNorm, nn::RMSNorm and nn::Embedding", "[nn][norm][embedding]") {
  nn::LayerNorm ln({4});
  CHECK(values_of(ln.weight) == std::vector<double>(4, 1.0));
  CHECK(values_of(ln.bias) == std::vector<double>(4, 0.0));
  const Tensor x = make_input({2, 4}, kF32, Domain::kAny, 61);
  const Tensor y = ln.forward(x);
  CHECK(compare_values(values_of(y), round_to(norm_ref(values_of(x), 4, {}, {}, 1e-5, false), kF32),
                       tolerance_for(kF32, OpKind::kReduction)) == "");
  hg::sum(y * y).backward();
  CHECK(ln.weight.grad().defined());
  CHECK(ln.bias.grad().defined());
  CHECK(ln.parameters().size() == 2);

  nn::RMSNorm rn({4}, 1e-6);
  CHECK(rn.parameters().size() == 1);
  CHECK(compare_values(values_of(rn.forward(x)), round_to(norm_ref(values_of(x), 4, {}, {}, 1e-6, true), kF32),
                       tolerance_for(kF32, OpKind::kReduction)) == "");

  Generator gen(3);
  nn::Embedding emb(6, 3, /*padding_idx=*/1, &gen);
  CHECK(values_of(emb.weight.select(0, 1)) == std::vector<double>(3, 0.0));  // like torch: the padding row is zero
  const Tensor e = emb.forward(int_tensor({1, 4, 4}, {3}, Device::cpu()));
  CHECK(e.sizes() == Shape{3, 3});
  hg::sum(e).backward();
  CHECK(values_of(emb.weight.grad().select(0, 4)) == std::vector<double>(3, 2.0));
  CHECK(values_of(emb.weight.grad().select(0, 1)) == std::vector<double>(3, 0.0));
}

// ---- PyTorch fixture ---------------------------------------------------------------------------

namespace {

nlohmann::json load_seq_fixture() {
  std::ifstream in(std::string(HG_TEST_FIXTURE_DIR) + "/seq_reference.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("layer_norm, rms_norm, embedding, cat, gather, index_select match PyTorch", "[kernels][torch]") {
  // Written by fixtures/make_seq_fixture.py (float64): f64 on every device
  // agrees to the f64 row, f32 to the f32 reduction row (each output and
  // gradient is one short row reduction of rounded inputs).
  const nlohmann::json fx = load_seq_fixture();
  using Run = std::function<Tensor(std::map<std::string, Tensor>&, std::map<std::string, Tensor>&)>;
  const std::vector<std::pair<std::string, Run>> runs{
      {"layer_norm", [](auto& in, auto&) { return hg::layer_norm(in["x"], {6}, in["w"], in["b"], 1e-5); }},
      {"rms_norm",
       [](auto& in, auto&) {
         return hg::rms_norm(in["x"], {2, 5}, in["w"], 1e-6);
       }},
      {"embedding", [](auto& in, auto& ints) { return hg::embedding(ints["idx"], in["w"], /*padding_idx=*/1); }},
      {"cat",
       [](auto& in, auto&) {
         return hg::cat({in["a"], in["b"]}, 1);
       }},
      {"gather", [](auto& in, auto& ints) { return hg::gather(in["x"], 1, ints["idx"]); }},
      {"index_select", [](auto& in, auto& ints) { return hg::index_select(in["x"], 0, ints["idx"]); }},
  };
  for (Device dev : test_devices()) {
    for (DType dt : {kF64, kF32}) {
      for (const auto& [name, run] : runs) {
        const nlohmann::json& c = fx[name];
        std::map<std::string, Tensor> in, ints;
        for (const auto& [n, j] : c["inputs"].items()) {
          in[n] = from_vector(j["values"].get<std::vector<double>>(), j["shape"].get<Shape>(), {.dtype = dt})
                      .to(dev)
                      .requires_grad_(true);
        }
        for (const auto& [n, j] : c["ints"].items()) {
          ints[n] = from_vector(j["values"].get<std::vector<int64_t>>(), j["shape"].get<Shape>()).to(dev);
        }
        Tensor out = run(in, ints);
        INFO(label(dev, dt, name));
        REQUIRE(out.sizes() == c["out"]["shape"].get<Shape>());
        const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
        CHECK(compare_values(values_of(out), c["out"]["values"].get<std::vector<double>>(), tol) == "");
        const Tensor d_out = from_vector(c["d_out"].get<std::vector<double>>(), out.sizes(), {.dtype = dt}).to(dev);
        out.backward(d_out);
        for (auto& [n, t] : in) {
          INFO("grad of " << n);
          CHECK(compare_values(values_of(t.grad()), c["grads"][n].get<std::vector<double>>(), tol) == "");
        }
      }
    }
  }
}

// Note [16-bit kernels through f32 on the CPU]: a 16-bit norm is the f32 kernel on the
// widened inputs with its outputs rounded once, bit for bit.
TEST_CASE("16-bit norms are bit-identical to the f32 kernels", "[kernels][norm][numerics]") {
  const auto same_bits = [](const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
           std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
  };
  const auto f32 = [](const Tensor& t) { return t.defined() ? t.to(kF32) : Tensor(); };
  for (DType dtype : {kF16, kBF16}) {
    for (DType w_dtype : {dtype, kF32}) {
      for (const Shape& shape : {Shape{5, 40}, Shape{300, 257}}) {
        INFO(dtype << " weights " << w_dtype << " " << shape_to_string(shape));
        const int64_t cols = shape[1];
        const Tensor x = make_input(shape, dtype, Domain::kAny, 81);
        const Tensor d = make_input(shape, dtype, Domain::kAny, 82);
        const Tensor w = make_input({cols}, w_dtype, Domain::kAny, 83);
        const Tensor b = make_input({cols}, w_dtype, Domain::kAny, 84);
        const ops::NormForward ln = ops::layer_norm(x, {cols}, w, b, 1e-5);
        const ops::NormForward ln32 = ops::layer_norm(f32(x), {cols}, f32(w), f32(b), 1e-5);
        CHECK(same_bits(ln.y, ln32.y.to(dtype)));
        CHECK(same_bits(ln.mean, ln32.mean));
        CHECK(same_bits(ln.rstd, ln32.rstd));
        const ops::NormBackward g = ops::layer_norm_backward(d, x, {cols}, ln.mean, ln.rstd, w, {true, true, true});
        const ops::NormBackward g32 =
            ops::layer_norm_backward(f32(d), f32(x), {cols}, ln32.mean, ln32.rstd, f32(w), {true, true, true});
        CHECK(same_bits(g.d_x, g32.d_x.to(dtype)));
        CHECK(same_bits(g.d_weight, g32.d_weight.to(g.d_weight.dtype())));
        CHECK(same_bits(g.d_bias, g32.d_bias.to(g.d_bias.dtype())));
        const ops::NormForward rn = ops::rms_norm(x, {cols}, w, 1e-6);
        const ops::NormForward rn32 = ops::rms_norm(f32(x), {cols}, f32(w), 1e-6);
        CHECK(same_bits(rn.y, rn32.y.to(dtype)));
        const ops::NormBackward rg = ops::rms_norm_backward(d, x, {cols}, rn.rstd, w, {true, true, false});
        const ops::NormBackward rg32 =
            ops::rms_norm_backward(f32(d), f32(x), {cols}, rn32.rstd, f32(w), {true, true, false});
        CHECK(same_bits(rg.d_x, rg32.d_x.to(dtype)));
        CHECK(same_bits(rg.d_weight, rg32.d_weight.to(rg.d_weight.dtype())));
      }
    }
  }
}
