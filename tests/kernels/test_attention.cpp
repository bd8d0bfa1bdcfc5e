// Batched matmul / bmm (kernels/gemm/gemm.h) and scaled_dot_product_attention's
// math path (kernels/attention/attention.h, autograd/functions_attention.cpp): values
// against f64 references computed here with plain loops on every device and
// dtype, cuda-emu against the CPU, f64 gradcheck (broadcast, transposed views,
// causal, masks, dropout with a fixed seed), a PyTorch fixture
// (fixtures/make_attention_fixture.py), the no-copy path of transposed views,
// the fully-masked-row rule, Philox dropout agreement and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "core/generator.h"
#include "kernels/gemm/gemm.h"
#include "nn/functional.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// f64 reference of torch.matmul for rank >= 2 operands: broadcast with expand
// (a view, no GEMM) and loop.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b) {
  const Shape batch = ops::matmul_batch_shape(a, b);
  Shape sa = batch, sb = batch;
  sa.push_back(a.size(-2));
  sa.push_back(a.size(-1));
  sb.push_back(b.size(-2));
  sb.push_back(b.size(-1));
  const std::vector<double> av = a.to(Device::cpu()).expand(sa).to(kF64).contiguous().to_vector<double>();
  const std::vector<double> bv = b.to(Device::cpu()).expand(sb).to(kF64).contiguous().to_vector<double>();
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  int64_t nb = 1;
  for (int64_t d : batch) nb *= d;
  std::vector<double> out(static_cast<size_t>(nb * m * n), 0.0);
  for (int64_t z = 0; z < nb; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t t = 0; t < k; ++t)
          s += av[static_cast<size_t>((z * m + i) * k + t)] * bv[static_cast<size_t>((z * k + t) * n + j)];
        out[static_cast<size_t>((z * m + i) * n + j)] = s;
      }
  return out;
}

// f64 reference of the attention math (no dropout), q/k/v of one batch shape
// [B, L, E] etc. (already broadcast); mask (bool as 0/1 or additive) [B, L, S]
// or empty. A fully masked row gives 0 (Note [Fully masked rows]).
std::vector<double> ref_sdpa(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev, double scale, bool causal,
                             const std::vector<double>* mask, bool bool_mask) {
  std::vector<double> out(static_cast<size_t>(B * L * Ev), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> x(static_cast<size_t>(S), -INFINITY);
      double m = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        if (causal && j > i) continue;
        double add = 0;
        if (mask != nullptr) {
          const double mv = (*mask)[static_cast<size_t>((b * L + i) * S + j)];
          if (bool_mask && mv == 0.0) continue;
          if (!bool_mask) add = mv;
        }
        double s = 0;
        for (int64_t e = 0; e < E; ++e)
          s += q[static_cast<size_t>((b * L + i) * E + e)] * k[static_cast<size_t>((b * S + j) * E + e)];
        x[static_cast<size_t>(j)] = scale * s + add;
        m = std::max(m, x[static_cast<size_t>(j)]);
      }
      if (m == -INFINITY) continue;
      double z = 0;
      for (double xj : x) z += xj == -INFINITY ? 0.0 : std::exp(xj - m);
      for (int64_t j = 0; j < S; ++j) {
        const double p = x[static_cast<size_t>(j)] == -INFINITY ? 0.0 : std::exp(x[static_cast<size_t>(j)] - m) / z;
        for (int64_t e = 0; e < Ev; ++e)
          out[static_cast<size_t>((b * L + i) * Ev + e)] += p * v[static_cast<size_t>((b * S + j) * Ev + e)];
      }
    }
  return out;
}

std::vector<double> f64_values(const Tensor& t) {
  return t.to(Device::cpu()).to(kF64).contiguous().to_vector<double>();
}

// Attention chains three roundings to the dtype (scores, probabilities, the
// output GEMM), each within the reduction row, so 16-bit results get three
// times its tolerance against the f64 reference (f32/f64 stay on the row).
Tolerance attention_tolerance(DType dt) {
  Tolerance t = tolerance_for(dt, OpKind::kReduction);
  if (dt == kF16 || dt == kBF16) {
    t.rtol *= 3;
    t.atol *= 3;
  }
  return t;
}

}  // namespace

TEST_CASE("batched matmul broadcasts batch dims and matches an f64 reference", "[kernels][gemm][batched]") {
  struct Case {
    Shape a, b;
    bool transpose_b;  // b is given as [..., N, K] and used as b.transpose(-2, -1)
  };
  const std::vector<Case> cases{{{2, 3, 4, 5}, {2, 3, 5, 3}, false}, {{2, 1, 4, 5}, {3, 5, 2}, false},
                                {{4, 5}, {2, 3, 5, 3}, false},       {{2, 3, 4, 5}, {5, 6}, false},
                                {{2, 3, 4, 5}, {2, 3, 6, 5}, true},  {{3, 1, 2, 4}, {1, 2, 4, 3}, false},
                                {{2, 3, 0, 5}, {2, 3, 5, 2}, false}, {{2, 1, 7, 3}, {1, 4, 3, 2}, false}};
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      uint64_t seed = 1;
      for (const Case& c : cases) {
        const Tensor a = make_input(c.a, dt, Domain::kAny, seed++).to(dev);
        Tensor b = make_input(c.b, dt, Domain::kAny, seed++).to(dev);
        if (c.transpose_b) b = b.transpose(-2, -1);
        const Tensor y = hg::matmul(a, b);
        INFO(label(dev, dt, "a " + a.shape_str() + " b " + b.shape_str()));
        const std::vector<double> want = ref_matmul(a, b);
        CHECK(compare_values(f64_values(y), round_to(want, dt), tolerance_for(dt, OpKind::kReduction)) == "");
        CHECK(a.matmul(b).sizes() == y.sizes());
      }
    }
  }
}

TEST_CASE("matmul and bmm take 1-D operands and check shapes as torch does", "[kernels][gemm][batched]") {
  const Tensor v = from_vector<double>({1, 2, 3}, {3});
  const Tensor m = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  CHECK(hg::matmul(v, m).sizes() == Shape{2});
  CHECK(hg::matmul(v, m).to_vector<double>() == std::vector<double>{4, 5});
  CHECK(hg::matmul(v, v).dim() == 0);
  CHECK(hg::matmul(v, v).item<double>() == 14.0);
  CHECK(hg::matmul(zeros({2, 4, 3}, {.dtype = kF64}), v).sizes() == Shape{2, 4});
  CHECK(hg::bmm(zeros({2, 4, 3}), zeros({2, 3, 5})).sizes() == Shape{2, 4, 5});
  CHECK_THROWS_WITH(hg::bmm(zeros({2, 4, 3}), zeros({3, 3, 5})), Catch::Contains("[2, 4, 3] @ [3, 3, 5]"));
  CHECK_THROWS_WITH(hg::bmm(zeros({4, 3}), zeros({3, 5})), Catch::Contains("3-D"));
  CHECK_THROWS_WITH(hg::matmul(zeros({2, 3, 4, 5}), zeros({3, 3, 5, 2})),
                    Catch::Contains("batch sizes differ: [2, 3, 4, 5] @ [3, 3, 5, 2]"));
  CHECK_THROWS_WITH(hg::matmul(zeros({2, 4, 5}), zeros({2, 4, 5})), Catch::Contains("inner dims 5 != 4"));
}

TEST_CASE("transposed views reach the GEMM as a transpose flag, in one batched call", "[kernels][gemm][batched]") {
  for (Device dev : test_devices()) {
    const Tensor q = randn({2, 3, 5, 4}).to(dev), k = randn({2, 3, 6, 4}).to(dev);
    const Tensor kt = k.transpose(-2, -1);  // [2, 3, 4, 6], a view
    REQUIRE(!kt.is_contiguous());
    const auto before = ops::detail::gemm_call_stats();
    const Tensor s = ops::matmul(q, kt);
    const auto after = ops::detail::gemm_call_stats();
    INFO(dev.str());
    CHECK(after.calls - before.calls == 1);  // one strided-batched GEMM, batch B * H
    CHECK(after.last_batch == 6);
    CHECK(after.last_trans_b);  // the view's storage is read transposed, not copied
    CHECK(!after.last_trans_a);
    CHECK(compare_values(f64_values(s), ref_matmul(q, kt), tolerance_for(kF32, OpKind::kReduction)) == "");
    // [B, 1, T, D] @ [H, D, T]: the batch dims do not collapse into one stride;
    // B GEMMs of batch H, still without copying or expanding an operand; on a
    // CPU whose f32 GEMMs take oneDNN, one call with an outer batch level of B
    // (GemmArgs::outer_batch), each level broadcasting one operand.
    const bool one_call = dev.is_cpu() && std::string(cpu::gemm_path(kF32)) == "onednn-f32";
    const Tensor a4 = randn({2, 1, 5, 4}).to(dev), b3 = randn({3, 4, 5}).to(dev);
    const auto b2 = ops::detail::gemm_call_stats();
    const Tensor y = ops::matmul(a4, b3);
    const auto a2 = ops::detail::gemm_call_stats();
    CHECK(y.sizes() == Shape{2, 3, 5, 5});
    CHECK(a2.calls - b2.calls == (one_call ? 1 : 2));
    CHECK(a2.last_batch == 3);
    CHECK(compare_values(f64_values(y), ref_matmul(a4.expand({2, 3, 5, 4}), b3.expand({2, 3, 4, 5})),
                         tolerance_for(kF32, OpKind::kReduction)) == "");
    // Attention's heads read in place from a fused projection: [B, T, H, D]
    // permuted to [B, H, T, D] (B's stride is not H's times H), times its
    // own transpose: B calls of batch H, or one on oneDNN.
    const Tensor x = randn({2, 5, 3, 4}).to(dev).permute({0, 2, 1, 3});
    REQUIRE(!x.is_contiguous());
    const auto b3c = ops::detail::gemm_call_stats();
    const Tensor z = ops::matmul(x, x.transpose(-2, -1));
    const auto a3c = ops::detail::gemm_call_stats();
    CHECK(a3c.calls - b3c.calls == (one_call ? 1 : 2));
    CHECK(compare_values(f64_values(z), ref_matmul(x, x.transpose(-2, -1)), tolerance_for(kF32, OpKind::kReduction)) ==
          "");
  }
}

TEST_CASE("gradcheck: batched matmul, bmm, sdpa, repeat_interleave (f64, cpu)", "[autograd][gradcheck][attention]") {
  auto in = [](Shape s, uint64_t seed) {
    return hg::mul(make_input(s, kF64, Domain::kAny, seed), 0.5).requires_grad_(true);
  };
  using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
  const Tensor bool_mask = from_vector<double>({1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0}, {3, 5}).to(kBool);
  const Tensor float_mask = make_input({2, 1, 3, 5}, kF64, Domain::kAny, 99);
  struct GradCase {
    std::string name;
    Fn fn;
    std::vector<Tensor> inputs;
  };
  const std::vector<GradCase> cases{
      {"matmul 4-D", [](const auto& x) { return hg::matmul(x[0], x[1]); }, {in({2, 2, 3, 4}, 1), in({2, 2, 4, 2}, 2)}},
      {"matmul broadcast",
       [](const auto& x) { return hg::matmul(x[0], x[1]); },
       {in({2, 1, 3, 4}, 3), in({2, 4, 2}, 4)}},
      {"matmul transposed view",
       [](const auto& x) { return hg::matmul(x[0], hg::transpose(x[1], -2, -1)); },
       {in({2, 3, 4}, 5), in({2, 2, 4}, 6)}},
      {"matmul vector", [](const auto& x) { return hg::matmul(x[0], x[1]); }, {in({4}, 7), in({2, 4, 3}, 8)}},
      {"bmm", [](const auto& x) { return hg::bmm(x[0], x[1]); }, {in({2, 3, 4}, 9), in({2, 4, 2}, 10)}},
      {"sdpa",
       [](const auto& x) { return hg::scaled_dot_product_attention(x[0], x[1], x[2]); },
       {in({2, 3, 4}, 11), in({2, 5, 4}, 12), in({2, 5, 3}, 13)}},
      {"sdpa causal",
       [](const auto& x) { return hg::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true}); },
       {in({2, 3, 4}, 14), in({2, 5, 4}, 15), in({2, 5, 3}, 16)}},
      {"sdpa bool mask + causal",
       [&](const auto& x) {
         return hg::scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = bool_mask, .is_causal = true});
       },
       {in({2, 3, 4}, 17), in({2, 5, 4}, 18), in({2, 5, 3}, 19)}},
      {"sdpa float mask, broadcast heads",
       [&](const auto& x) {
         return hg::scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = float_mask, .scale = 0.7});
       },
       {in({2, 2, 3, 4}, 20), in({1, 2, 5, 4}, 21), in({2, 1, 5, 3}, 22)}},
      {"sdpa dropout (fixed seed)",
       [](const auto& x) {
         Generator gen(1234);  // a fresh generator per call: the same keep mask every evaluation
         return hg::scaled_dot_product_attention(x[0], x[1], x[2], {.dropout_p = 0.3, .generator = &gen});
       },
       {in({2, 3, 4}, 23), in({2, 5, 4}, 24), in({2, 5, 3}, 25)}},
      {"repeat_interleave", [](const auto& x) { return hg::repeat_interleave(x[0], 2, 1); }, {in({2, 3, 2}, 26)}},
  };
  for (const GradCase& c : cases) {
    INFO(c.name);
    CHECK(gradcheck(c.fn, c.inputs) == "");
  }
}

TEST_CASE("sdpa matches an f64 reference on every device and dtype", "[kernels][attention]") {
  const int64_t B = 3, L = 5, S = 7, E = 8, Ev = 4;
  Generator mg(5);
  const Tensor bmask = rand({B, L, S}, {.dtype = kF64}, &mg).to(kF64);
  const std::vector<double> bool_vals = [&] {
    std::vector<double> v = bmask.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = (v[i] > 0.3 || i % S == 2) ? 1.0 : 0.0;
    return v;
  }();
  const Tensor bool_mask = from_vector(bool_vals, {B, L, S}).to(kBool);
  const Tensor add_mask = make_input({L, S}, kF64, Domain::kAny, 3);
  std::vector<double> add_full;
  for (int64_t b = 0; b < B; ++b)
    for (double x : add_mask.to_vector<double>()) add_full.push_back(x);
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool causal = variant == 1 || variant == 3;
        const Tensor q = make_input({B, L, E}, dt, Domain::kAny, 31 + variant).to(dev);
        const Tensor k = make_input({B, S, E}, dt, Domain::kAny, 41 + variant).to(dev);
        const Tensor v = make_input({B, S, Ev}, dt, Domain::kAny, 51 + variant).to(dev);
        SdpaOptions o{.is_causal = causal};
        const std::vector<double>* mask = nullptr;
        if (variant == 2) {
          o.attn_mask = bool_mask.to(dev);
          mask = &bool_vals;
        }
        if (variant == 3) {
          o.attn_mask = add_mask.to(dt).to(dev);
          mask = &add_full;
        }
        const Tensor y = hg::scaled_dot_product_attention(q, k, v, o);
        INFO(label(dev, dt, "variant " + std::to_string(variant)));
        REQUIRE(y.sizes() == Shape{B, L, Ev});
        const std::vector<double> want = ref_sdpa(f64_values(q), f64_values(k), f64_values(v), B, L, S, E, Ev,
                                                  1.0 / std::sqrt(8.0), causal, mask, variant == 2);
        CHECK(compare_values(f64_values(y), want, attention_tolerance(dt)) == "");
      }
    }
  }
}

TEST_CASE("sdpa forward and backward: CUDA against the CPU for every dtype", "[kernels][attention][cuda-vs-cpu]") {
  const std::vector<Device> devs = test_devices();
  if (devs.size() < 2) return;  // nothing to compare in a CPU-only build
  const Tensor mask = (rand({4, 6}) > 0.3).to(kBool);
  for (DType dt : float_dtypes()) {
    for (double p : {0.0, 0.4}) {
      std::vector<std::vector<double>> results[2];
      for (int d = 0; d < 2; ++d) {
        const Device dev = devs[static_cast<size_t>(d)];
        Tensor q = make_input({2, 2, 4, 8}, dt, Domain::kAny, 61).to(dev).requires_grad_(true);
        Tensor k = make_input({2, 2, 6, 8}, dt, Domain::kAny, 62).to(dev).requires_grad_(true);
        Tensor v = make_input({2, 2, 6, 3}, dt, Domain::kAny, 63).to(dev).requires_grad_(true);
        Generator gen(77);
        const Tensor y = hg::scaled_dot_product_attention(
            q, k, v, {.attn_mask = mask.to(dev), .dropout_p = p, .is_causal = true, .generator = &gen});
        y.backward(make_input(y.sizes(), dt, Domain::kAny, 64).to(dev));
        results[d] = {f64_values(y), f64_values(q.grad()), f64_values(k.grad()), f64_values(v.grad())};
      }
      for (size_t i = 0; i < 4; ++i) {
        INFO(std::string(dtype_name(dt)) << " dropout " << p << " tensor " << i);
        // Same algorithm, same roundings; only GEMM summation order differs.
        CHECK(compare_values(results[1][i], results[0][i], attention_tolerance(dt)) == "");
      }
    }
  }
}

TEST_CASE("sdpa: fully masked rows give zeros (no NaN), gradients too", "[kernels][attention]") {
  for (Device dev : test_devices()) {
    Tensor q = randn({1, 3, 4}, {.dtype = kF64}).to(dev).requires_grad_(true);
    Tensor k = randn({1, 5, 4}, {.dtype = kF64}).to(dev).requires_grad_(true);
    Tensor v = randn({1, 5, 2}, {.dtype = kF64}).to(dev).requires_grad_(true);
    // row 1 masked entirely by the bool mask; row 2 entirely by -inf
    const Tensor bm = from_vector<double>({1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {3, 5}).to(kBool).to(dev);
    const Tensor fm = from_vector<double>(
                          {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, {3, 5})
                          .to(dev);
    for (const Tensor& m : {bm, fm}) {
      q.set_grad(Tensor());
      k.set_grad(Tensor());
      v.set_grad(Tensor());
      const Tensor y = hg::scaled_dot_product_attention(q, k, v, {.attn_mask = m});
      hg::sum(y).backward();
      const std::vector<double> yv = f64_values(y);
      const int masked_row = m.dtype() == kBool ? 1 : 2;
      INFO(dev.str() << " " << m.dtype());
      for (int e = 0; e < 2; ++e) CHECK(yv[static_cast<size_t>(masked_row * 2 + e)] == 0.0);
      for (double x : yv) CHECK(std::isfinite(x));
      const std::vector<double> dq = f64_values(q.grad());
      for (int e = 0; e < 4; ++e) CHECK(dq[static_cast<size_t>(masked_row * 4 + e)] == 0.0);
      for (double x : f64_values(k.grad())) CHECK(std::isfinite(x));
    }
  }
}

TEST_CASE("sdpa dropout: Philox stream, same mask on every device, scaled by 1/(1-p)",
          "[kernels][attention][dropout]") {
  const Tensor q = zeros({1, 64, 4}), k = zeros({1, 64, 4});  // uniform attention: p = 1/64 everywhere
  const Tensor v = ones({1, 64, 1});
  std::vector<std::vector<double>> outs;
  for (Device dev : test_devices()) {
    Generator gen(2024);
    const Tensor y =
        hg::scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), {.dropout_p = 0.25, .generator = &gen});
    outs.push_back(f64_values(y));
    // Each output is (kept keys) / 64 / 0.75; over 64 rows x 64 keys about 3/4 are kept.
    double total = 0;
    for (double x : outs.back()) total += x * 0.75 * 64;
    CHECK(total > 0.70 * 4096);
    CHECK(total < 0.80 * 4096);
    Generator gen2(2024);
    const Tensor y2 =
        hg::scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), {.dropout_p = 0.25, .generator = &gen2});
    CHECK(f64_values(y2) == outs.back());  // same seed, same mask
    const Tensor y3 =
        hg::scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), {.dropout_p = 0.25, .generator = &gen2});
    CHECK(f64_values(y3) != outs.back());  // the next offset, another mask
    const Tensor all = hg::scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), {.dropout_p = 1.0});
    for (double x : f64_values(all)) CHECK(x == 0.0);
  }
  for (size_t i = 1; i < outs.size(); ++i) {
    CHECK(compare_values(outs[i], outs[0], tolerance_for(kF32, OpKind::kReduction)) == "");
  }
}

TEST_CASE("sdpa bad input names the shapes", "[kernels][attention][errors]") {
  const Tensor q = zeros({2, 4, 8}), k = zeros({2, 6, 8}), v = zeros({2, 6, 3});
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(q, zeros({2, 6, 7}), v),
                    Catch::Contains("head dims differ: q [2, 4, 8] and k [2, 6, 7]"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(q, k, zeros({2, 5, 3})),
                    Catch::Contains("k [2, 6, 8] and v [2, 5, 3]"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({4, 5})}),
                    Catch::Contains("attn_mask [4, 5] is not broadcastable to the attention scores [2, 4, 6]"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(zeros({8}), k, v), Catch::Contains("at least 2 dims, got q [8]"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(zeros({3, 4, 8}), k, v), Catch::Contains("batch sizes differ"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}), Catch::Contains("dropout_p"));
  CHECK_THROWS_WITH(hg::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({4, 6}, {.dtype = kI32})}),
                    Catch::Contains("bool (true = attend) or floating"));
  CHECK(hg::choose_attention_path(q, k, v, {}) == AttentionPath::math);
  const Tensor q2 = randn({2, 4, 8}), k2 = randn({2, 6, 8}), v2 = randn({2, 6, 3});
  CHECK(nn::functional::scaled_dot_product_attention(q2, k2, v2, {.is_causal = true}).to_vector<float>() ==
        hg::scaled_dot_product_attention(q2, k2, v2, {.is_causal = true}).to_vector<float>());
}

TEST_CASE("repeat_interleave repeats slices in place", "[kernels][attention]") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  CHECK(hg::repeat_interleave(x, 2, 0).to_vector<double>() == std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(hg::repeat_interleave(x, 3, -1).to_vector<double>() == std::vector<double>{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
  CHECK_THROWS_WITH(hg::repeat_interleave(x, 2, 2), Catch::Contains("dim 2 out of range for [2, 2]"));
}

// ---- PyTorch fixture ---------------------------------------------------------------------------

TEST_CASE("batched matmul and scaled_dot_product_attention match PyTorch", "[kernels][torch][attention]") {
  // Written by fixtures/make_attention_fixture.py (float64): f64 on every
  // device agrees to the f64 row, f32 to the f32 reduction row.
  std::ifstream file(std::string(HG_TEST_FIXTURE_DIR) + "/attention_reference.json");
  REQUIRE(file.good());
  const nlohmann::json fx = nlohmann::json::parse(file);
  using Run = std::function<Tensor(std::map<std::string, Tensor>&, std::map<std::string, Tensor>&)>;
  const std::vector<std::pair<std::string, Run>> runs{
      {"matmul_4d", [](auto& in, auto&) { return hg::matmul(in["a"], in["b"]); }},
      {"matmul_broadcast", [](auto& in, auto&) { return hg::matmul(in["a"], in["b"]); }},
      {"matmul_vec_left", [](auto& in, auto&) { return hg::matmul(in["a"], in["b"]); }},
      {"matmul_vec_right", [](auto& in, auto&) { return hg::matmul(in["a"], in["b"]); }},
      {"matmul_transposed_view", [](auto& in, auto&) { return hg::matmul(in["a"], hg::transpose(in["b"], -2, -1)); }},
      {"sdpa_plain", [](auto& in, auto&) { return hg::scaled_dot_product_attention(in["q"], in["k"], in["v"]); }},
      {"sdpa_causal",
       [](auto& in, auto&) {
         return hg::scaled_dot_product_attention(in["q"], in["k"], in["v"], {.is_causal = true});
       }},
      {"sdpa_bool_mask",
       [](auto& in, auto& m) {
         return hg::scaled_dot_product_attention(in["q"], in["k"], in["v"], {.attn_mask = m["bool_mask"].to(kBool)});
       }},
      {"sdpa_float_mask",
       [](auto& in, auto& m) {
         return hg::scaled_dot_product_attention(in["q"], in["k"], in["v"],
                                                 {.attn_mask = m["float_mask"], .scale = 0.3});
       }},
  };
  for (Device dev : test_devices()) {
    for (DType dt : {kF64, kF32}) {
      for (const auto& [name, run] : runs) {
        const nlohmann::json& c = fx[name];
        std::map<std::string, Tensor> in, masks;
        for (const auto& [n, j] : c["inputs"].items()) {
          in[n] = from_vector(j["values"].get<std::vector<double>>(), j["shape"].get<Shape>(), {.dtype = dt})
                      .to(dev)
                      .requires_grad_(true);
        }
        for (const auto& [n, j] : c["masks"].items()) {
          masks[n] =
              from_vector(j["values"].get<std::vector<double>>(), j["shape"].get<Shape>(), {.dtype = dt}).to(dev);
        }
        Tensor out = run(in, masks);
        INFO(label(dev, dt, name));
        REQUIRE(out.sizes() == c["out"]["shape"].get<Shape>());
        const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
        CHECK(compare_values(f64_values(out), c["out"]["values"].get<std::vector<double>>(), tol) == "");
        const Tensor d_out = from_vector(c["d_out"].get<std::vector<double>>(), out.sizes(), {.dtype = dt}).to(dev);
        out.backward(d_out);
        for (auto& [n, t] : in) {
          INFO("grad of " << n);
          CHECK(compare_values(f64_values(t.grad()), c["grads"][n].get<std::vector<double>>(), tol) == "");
        }
      }
    }
  }
}
