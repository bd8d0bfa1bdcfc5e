// The cuDNN attention path (kernels/attention/attention_cudnn.h): forward and backward
// through cuDNN's fused graphs (on cuda-emu, the stand-in of
// runtime/emu/runtime_cudnn_graph.cpp), and the path switch of
// scaled_dot_product_attention (SdpaOptions::path, HG_ATTENTION). Compared against an f64 reference computed here from
// the rounded inputs (softmax(scale Q K^T + top-left causal mask) V, its
// log-sum-exp and the analytic gradients) and against the math path, for head
// dims 64 and 128, causal and not, odd T, L != S, and the fused [B, T, 3, H, D]
// qkv layout read and its gradient written in place; both backward graphs
// (the deterministic one and the dQ-accumulating one). Tolerances:
// tests/kernels/tolerance.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/functions_attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/attention/flash_attention.h"
#include "tests/kernels/test_support.h"
#include "tests/skip.h"

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

struct Case {
  int64_t b, h, l, s, d;
  bool causal;
};

// Values and, per element, sum |term| of its sum (the scale of the error of
// rounding each P_ij or dS_ij once to 16 bits, as cuDNN and the flash kernels do).
struct Reference {
  std::vector<double> out, lse, dq, dk, dv, out_mag, dq_mag, dk_mag, dv_mag;
};

// f64 attention on contiguous [BH, L, D] / [BH, S, D] values.
Reference reference(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& d_out, double scale) {
  const int64_t bh = c.b * c.h, l = c.l, s = c.s, d = c.d;
  const auto at = [](int64_t i) { return static_cast<size_t>(i); };
  Reference r;
  r.out.assign(at(bh * l * d), 0.0);
  r.lse.assign(at(bh * l), 0.0);
  r.dq = r.out_mag = r.dq_mag = r.out;
  r.dk.assign(at(bh * s * d), 0.0);
  r.dv = r.dk_mag = r.dv_mag = r.dk;
  std::vector<double> p(at(s)), dp(at(s));
  for (int64_t b = 0; b < bh; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      const int64_t qi = (b * l + i) * d;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        double acc = 0;
        for (int64_t x = 0; x < d; ++x) acc += q[at(qi + x)] * k[at((b * s + j) * d + x)];
        p[at(j)] = (c.causal && j > i) ? -std::numeric_limits<double>::infinity() : acc * scale;
        m = std::max(m, p[at(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += (p[at(j)] = std::exp(p[at(j)] - m));
      r.lse[at(b * l + i)] = m + std::log(sum);
      double delta = 0;
      for (int64_t j = 0; j < s; ++j) {
        const double pj = p[at(j)] /= sum;
        double acc = 0;
        for (int64_t x = 0; x < d; ++x) {
          const double vx = v[at((b * s + j) * d + x)];
          r.out[at(qi + x)] += pj * vx;
          r.out_mag[at(qi + x)] += pj * std::fabs(vx);
          acc += d_out[at(qi + x)] * vx;
        }
        dp[at(j)] = acc;
        delta += pj * acc;
      }
      for (int64_t j = 0; j < s; ++j) {
        const double pj = p[at(j)], ds = pj * (dp[at(j)] - delta);
        for (int64_t x = 0; x < d; ++x) {
          const size_t kj = at((b * s + j) * d + x);
          r.dq[at(qi + x)] += scale * ds * k[kj];
          r.dk[kj] += scale * ds * q[at(qi + x)];
          r.dv[kj] += pj * d_out[at(qi + x)];
          r.dq_mag[at(qi + x)] += scale * std::fabs(ds * k[kj]);
          r.dk_mag[kj] += scale * std::fabs(ds * q[at(qi + x)]);
          r.dv_mag[kj] += pj * std::fabs(d_out[at(qi + x)]);
        }
      }
    }
  }
  return r;
}

// Inputs in [-1.2, 1.2): scores O(1) after the 1/sqrt(D) scale.
Tensor input(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<double> x = make_input(shape, kF64, Domain::kAny, seed).to_vector<double>();
  for (double& e : x) e *= 0.4;
  return from_vector(x, shape, {.dtype = dtype});
}

// The table's reduction tolerance plus u * sum_j |x_j y_j| per element: the
// error of rounding each P_ij (dS_ij) to the 16-bit dtype before the product
// (u = 2^-11 f16, 2^-8 bf16), times `rounding_terms` (one for the f64
// reference; two against the math path, which rounds at other points).
std::string compare_with_terms(const std::vector<double>& actual, const std::vector<double>& expected,
                               const std::vector<double>& magnitude, DType dt, double table_factor,
                               double rounding_terms) {
  Tolerance tol = tolerance_for(dt, OpKind::kReduction);
  tol.atol *= table_factor;
  tol.rtol *= table_factor;
  const double u = dt == kBF16 ? 0x1p-8 : 0x1p-11;
  std::vector<double> slack(actual.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double allowed = tol.atol + tol.rtol * std::fabs(expected[i]) + rounding_terms * u * magnitude[i];
    slack[i] = std::fabs(actual[i] - expected[i]) <= allowed ? expected[i] : actual[i];
  }
  return compare_values(slack, expected, Tolerance{0.0, 0.0});
}

std::string case_name(const Case& c, DType dt) {
  return label(Device::cuda(0), dt,
               "B" + std::to_string(c.b) + " H" + std::to_string(c.h) + " L" + std::to_string(c.l) + " S" +
                   std::to_string(c.s) + " D" + std::to_string(c.d) + (c.causal ? " causal" : ""));
}

bool has_cuda() {
  for (const Device dev : test_devices()) {
    if (dev.is_cuda()) return true;
  }
  return false;
}

// The cuDNN path on the CUDA device when it can run there (cuda-emu: always);
// empty string when it runs, else the reason (reported, the test skipped).
std::string cudnn_skip_reason() {
  if (!has_cuda()) return "no CUDA backend in this build";
  const Tensor probe = zeros({1, 1, 8, 64}, {.dtype = kF16, .device = Device::cuda(0)});
  return ops::cudnn_attention_unsupported_reason(probe, probe, probe, false, 0.0);
}

// The cuDNN path through the ops layer (out, lse, dq, dk, dv) and through the
// differentiable op (the gradients of sum(out * d_out)), against the f64
// reference; the op's gradients are the ops layer's.
void check_case(const Case& c, DType dt) {
  INFO(case_name(c, dt));
  const uint64_t seed = static_cast<uint64_t>(c.l * 131 + c.s * 7 + c.d + (c.causal ? 1 : 0));
  const Tensor q = input({c.b, c.h, c.l, c.d}, dt, seed), k = input({c.b, c.h, c.s, c.d}, dt, seed + 1);
  const Tensor v = input({c.b, c.h, c.s, c.d}, dt, seed + 2), d_out = input({c.b, c.h, c.l, c.d}, dt, seed + 3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const Reference ref = reference(c, values_of(q), values_of(k), values_of(v), values_of(d_out), scale);
  const Device cuda = Device::cuda(0);
  const ops::FlashForward f = ops::cudnn_attention_forward(q.to(cuda), k.to(cuda), v.to(cuda), scale, c.causal);
  REQUIRE(f.out.sizes() == q.sizes());
  REQUIRE(f.lse.sizes() == Shape({c.b, c.h, c.l}));
  CHECK(compare_values(values_of(f.lse), ref.lse, Tolerance{1e-5, 1e-5}) == "");
  CHECK(compare_with_terms(values_of(f.out), ref.out, ref.out_mag, dt, 1.0, 1.0) == "");
  const ops::FlashBackward g =
      ops::cudnn_attention_backward(d_out.to(cuda), q.to(cuda), k.to(cuda), v.to(cuda), f.out, f.lse, scale, c.causal);
  REQUIRE(g.dq.sizes() == q.sizes());
  REQUIRE(g.dk.sizes() == k.sizes());
  REQUIRE(g.dv.sizes() == v.sizes());
  CHECK(g.dq.dtype() == dt);
  CHECK(compare_with_terms(values_of(g.dq), ref.dq, ref.dq_mag, dt, 1.0, 1.0) == "");
  CHECK(compare_with_terms(values_of(g.dk), ref.dk, ref.dk_mag, dt, 1.0, 1.0) == "");
  CHECK(compare_with_terms(values_of(g.dv), ref.dv, ref.dv_mag, dt, 1.0, 1.0) == "");

  Tensor qg = q.to(cuda).requires_grad_(), kg = k.to(cuda).requires_grad_(), vg = v.to(cuda).requires_grad_();
  const SdpaOptions opts{.is_causal = c.causal, .path = AttentionPath::cudnn};
  REQUIRE(choose_attention_path(qg, kg, vg, opts) == AttentionPath::cudnn);
  const Tensor out = scaled_dot_product_attention(qg, kg, vg, opts);
  CHECK(values_of(out) == values_of(f.out));
  sum(mul(out, d_out.to(cuda))).backward();
  CHECK(compare_with_terms(values_of(qg.grad()), ref.dq, ref.dq_mag, dt, 1.0, 1.0) == "");
  CHECK(compare_with_terms(values_of(kg.grad()), ref.dk, ref.dk_mag, dt, 1.0, 1.0) == "");
  CHECK(compare_with_terms(values_of(vg.grad()), ref.dv, ref.dv_mag, dt, 1.0, 1.0) == "");
  CHECK(values_of(qg.grad()) == values_of(g.dq));
  CHECK(values_of(kg.grad()) == values_of(g.dk));
  CHECK(values_of(vg.grad()) == values_of(g.dv));
}

}  // namespace

TEST_CASE("cudnn attention: head dims 64 and 128, causal or not, odd T, L != S, against f64",
          "[cudnn-sdpa][needs-cudnn-sdpa]") {
  if (const std::string skip = cudnn_skip_reason(); !skip.empty()) HG_SKIP("the cuDNN attention path: " << skip);
  const std::vector<Case> cases{
      {2, 2, 17, 17, 64, true}, {2, 2, 17, 17, 64, false}, {1, 2, 33, 33, 128, true}, {1, 2, 33, 33, 128, false},
      {1, 1, 17, 40, 64, true}, {1, 1, 40, 17, 128, true}, {1, 1, 40, 17, 64, false}, {1, 1, 1, 1, 64, false},
  };
  for (const DType dt : {kF16, kBF16}) {
    for (const Case& c : cases) check_case(c, dt);
  }
}

// Against the math path of scaled_dot_product_attention on the CPU (same
// inputs, same dtype): three times the table's row for the three chained
// roundings of each side, plus two rounding terms (see compare_with_terms),
// as the flash test allows the flash kernels.
TEST_CASE("cudnn path agrees with the math path", "[cudnn-sdpa][sdpa][needs-cudnn-sdpa]") {
  if (const std::string skip = cudnn_skip_reason(); !skip.empty()) HG_SKIP("the cuDNN attention path: " << skip);
  uint64_t seed = 700;
  const Device cuda = Device::cuda(0);
  for (const DType dt : {kF16, kBF16}) {
    for (const int64_t d : {64, 128}) {
      for (const bool causal : {false, true}) {
        const int64_t t = 37;
        const Shape shape{1, 2, t, d};
        const Tensor q = input(shape, dt, ++seed), k = input(shape, dt, ++seed), v = input(shape, dt, ++seed);
        const Tensor d_out = input(shape, dt, ++seed);
        INFO(label(cuda, dt, "T " + std::to_string(t) + " D " + std::to_string(d) + (causal ? " causal" : "")));
        Tensor qm = q.clone().requires_grad_(), km = k.clone().requires_grad_(), vm = v.clone().requires_grad_();
        const Tensor om = scaled_dot_product_attention(qm, km, vm, {.is_causal = causal, .path = AttentionPath::math});
        sum(mul(om, d_out)).backward();
        Tensor qc = q.to(cuda).requires_grad_(), kc = k.to(cuda).requires_grad_(), vc = v.to(cuda).requires_grad_();
        const Tensor oc = scaled_dot_product_attention(qc, kc, vc, {.is_causal = causal, .path = AttentionPath::cudnn});
        sum(mul(oc, d_out.to(cuda))).backward();
        const Case c{1, 2, t, t, d, causal};
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const Reference r = reference(c, values_of(q), values_of(k), values_of(v), values_of(d_out), scale);
        CHECK(compare_with_terms(values_of(oc), values_of(om), r.out_mag, dt, 3.0, 2.0) == "");
        CHECK(compare_with_terms(values_of(qc.grad()), values_of(qm.grad()), r.dq_mag, dt, 3.0, 2.0) == "");
        CHECK(compare_with_terms(values_of(kc.grad()), values_of(km.grad()), r.dk_mag, dt, 3.0, 2.0) == "");
        CHECK(compare_with_terms(values_of(vc.grad()), values_of(vm.grad()), r.dv_mag, dt, 3.0, 2.0) == "");
      }
    }
  }
}

// q, k, v as views of the fused projection's [B, T, 3, H, D] output: read in
// place (no copy), equal bit for bit to contiguous inputs; the plan cache
// holds one plan per (shape, strides, dtype, causal) and reuses it.
TEST_CASE("cudnn attention: the fused qkv layout in place, plans cached by strides", "[cudnn-sdpa][needs-cudnn-sdpa]") {
  if (const std::string skip = cudnn_skip_reason(); !skip.empty()) HG_SKIP("the cuDNN attention path: " << skip);
#if defined(HG_WITH_CUDA)
  const Device cuda = Device::cuda(0);
  const int64_t b = 2, t = 21, h = 2, d = 64;
  const Tensor qkv = input({b, t, 3, h, d}, kF16, 41).to(cuda);
  const Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
  const Tensor v = qkv.select(2, 2).transpose(1, 2);
  CHECK(ops::cudnn_attention_unsupported_reason(q, k, v, false, 0.0).empty());
  const size_t before = cuda::cudnn_attention_plan_count();
  const ops::FlashForward f = ops::cudnn_attention_forward(q, k, v, 0.125, true);
  const size_t after_first = cuda::cudnn_attention_plan_count();
  CHECK(after_first == before + 1);
  const ops::FlashForward f2 = ops::cudnn_attention_forward(q, k, v, 0.125, true);
  CHECK(cuda::cudnn_attention_plan_count() == after_first);  // same key: reused
  CHECK(values_of(f2.out) == values_of(f.out));
  const ops::FlashForward fc =
      ops::cudnn_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), 0.125, true);
  CHECK(cuda::cudnn_attention_plan_count() == after_first + 1);  // other strides: a plan of their own
  CHECK(values_of(f.out) == values_of(fc.out));
  CHECK(values_of(f.lse) == values_of(fc.lse));
  CHECK(f.out.transpose(1, 2).is_contiguous());  // heads last, as the flash path returns it
  // And against the f64 reference.
  const Case c{b, h, t, t, d, true};
  const Reference r = reference(c, values_of(q.contiguous()), values_of(k.contiguous()), values_of(v.contiguous()),
                                std::vector<double>(static_cast<size_t>(b * h * t * d), 0.0), 0.125);
  CHECK(compare_with_terms(values_of(f.out), r.out, r.out_mag, kF16, 1.0, 1.0) == "");
#endif
}

// The backward reading q, k, v, out and d_out in place and writing dq, dk, dv
// into the fused [B, T, 3, H, D] gradient through their strides: equal bit for
// bit to the same call on contiguous copies, and to the f64 reference; one
// backward plan per (shapes, strides), reused; the dQ-accumulating graph
// gives the deterministic graph's values.
TEST_CASE("cudnn attention backward: strided operands in place, both graphs, plans cached",
          "[cudnn-sdpa][needs-cudnn-sdpa]") {
  if (const std::string skip = cudnn_skip_reason(); !skip.empty()) HG_SKIP("the cuDNN attention path: " << skip);
#if defined(HG_WITH_CUDA)
  const Device cuda = Device::cuda(0);
  for (const DType dt : {kF16, kBF16}) {
    for (const int64_t d : {64, 128}) {
      for (const bool causal : {true, false}) {
        INFO(label(cuda, dt, "D " + std::to_string(d) + (causal ? " causal" : "")));
        const int64_t b = 2, t = 19, h = 2;
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const Tensor qkv = input({b, t, 3, h, d}, dt, static_cast<uint64_t>(61 + d + (causal ? 1 : 0))).to(cuda);
        const auto part = [](const Tensor& x, int64_t i) { return x.select(2, i).transpose(1, 2); };
        const Tensor q = part(qkv, 0), k = part(qkv, 1), v = part(qkv, 2);
        const Tensor d_out = input({b, t, h, d}, dt, 77).to(cuda).transpose(1, 2);  // heads-last, as autograd gives it
        const ops::FlashForward f = ops::cudnn_attention_forward(q, k, v, scale, causal);
        const size_t before = cuda::cudnn_attention_plan_count();
        // the gradient of the fused projection, written in place through strides
        const Tensor grad = zeros({b, t, 3, h, d}, {.dtype = dt, .device = cuda});
        const Tensor dq = part(grad, 0), dk = part(grad, 1), dv = part(grad, 2);
        const Tensor stats = f.lse.contiguous();
        CHECK(cuda::cudnn_attention_backward(dq, dk, dv, d_out, q, k, v, f.out, stats, scale, causal) ==
              cuda::CudnnSdpaBackwardGraph::direct_dq);
        const size_t after_first = cuda::cudnn_attention_plan_count();
        CHECK(after_first == before + 1);
        const ops::FlashBackward g = ops::cudnn_attention_backward(d_out, q, k, v, f.out, f.lse, scale, causal);
        CHECK(cuda::cudnn_attention_plan_count() == after_first + 1);  // heads-last dq, dk, dv: other strides
        (void)ops::cudnn_attention_backward(d_out, q, k, v, f.out, f.lse, scale, causal);
        CHECK(cuda::cudnn_attention_plan_count() == after_first + 1);  // same key: reused
        CHECK(values_of(dq) == values_of(g.dq));
        CHECK(values_of(dk) == values_of(g.dk));
        CHECK(values_of(dv) == values_of(g.dv));
        // contiguous copies of every operand: the same values
        const ops::FlashBackward gc =
            ops::cudnn_attention_backward(d_out.contiguous(), q.contiguous(), k.contiguous(), v.contiguous(),
                                          f.out.contiguous(), f.lse, scale, causal);
        CHECK(values_of(gc.dq) == values_of(g.dq));
        CHECK(values_of(gc.dk) == values_of(g.dk));
        CHECK(values_of(gc.dv) == values_of(g.dv));
        // the accumulating graph: its own plan, the same values (dQ = 0 + dS K)
        const Tensor aq = zeros_like(g.dq), ak = zeros_like(g.dk), av = zeros_like(g.dv);
        CHECK(cuda::cudnn_attention_backward(aq, ak, av, d_out, q, k, v, f.out, stats, scale, causal,
                                             cuda::CudnnSdpaBackwardGraph::accumulate_dq) ==
              cuda::CudnnSdpaBackwardGraph::accumulate_dq);
        // twice: the accumulator is zeroed before each call, so no sum of two calls
        (void)cuda::cudnn_attention_backward(aq, ak, av, d_out, q, k, v, f.out, stats, scale, causal,
                                             cuda::CudnnSdpaBackwardGraph::accumulate_dq);
        CHECK(values_of(aq) == values_of(g.dq));
        CHECK(values_of(ak) == values_of(g.dk));
        CHECK(values_of(av) == values_of(g.dv));
        // the differentiable op on views of a fused qkv leaf: its gradient holds the ops layer's dq, dk, dv
        Tensor qkv_leaf = qkv.clone().requires_grad_();
        const Tensor o_op = scaled_dot_product_attention(part(qkv_leaf, 0), part(qkv_leaf, 1), part(qkv_leaf, 2),
                                                         {.is_causal = causal, .path = AttentionPath::cudnn});
        sum(mul(o_op, d_out)).backward();
        CHECK(values_of(part(qkv_leaf.grad(), 0)) == values_of(g.dq));
        CHECK(values_of(part(qkv_leaf.grad(), 1)) == values_of(g.dk));
        CHECK(values_of(part(qkv_leaf.grad(), 2)) == values_of(g.dv));
        // and the f64 reference
        const Case c{b, h, t, t, d, causal};
        const Reference r = reference(c, values_of(q.contiguous()), values_of(k.contiguous()),
                                      values_of(v.contiguous()), values_of(d_out.contiguous()), scale);
        CHECK(compare_with_terms(values_of(dq), r.dq, r.dq_mag, dt, 1.0, 1.0) == "");
        CHECK(compare_with_terms(values_of(dk), r.dk, r.dk_mag, dt, 1.0, 1.0) == "");
        CHECK(compare_with_terms(values_of(dv), r.dv, r.dv_mag, dt, 1.0, 1.0) == "");
      }
    }
  }
#endif
}

TEST_CASE("cudnn attention backward: clear errors", "[cudnn-sdpa][needs-cudnn-sdpa]") {
  if (const std::string skip = cudnn_skip_reason(); !skip.empty()) HG_SKIP("the cuDNN attention path: " << skip);
  const Device cuda = Device::cuda(0);
  const Tensor q = input({1, 2, 9, 64}, kF16, 81).to(cuda);
  const ops::FlashForward f = ops::cudnn_attention_forward(q, q, q, 0.125, true);
  CHECK_THROWS_WITH(ops::cudnn_attention_backward(q, q, q, q, f.out, f.lse.narrow(2, 0, 8), 0.125, true),
                    Contains("lse"));
  CHECK_THROWS_WITH(ops::cudnn_attention_backward(q.narrow(2, 0, 8), q, q, q, f.out, f.lse, 0.125, true),
                    Contains("d_out"));
  const Tensor q96 = zeros({1, 2, 9, 96}, {.dtype = kF16, .device = cuda});
  CHECK_THROWS_WITH(ops::cudnn_attention_backward(q96, q96, q96, q96, q96, f.lse, 0.125, true), Contains("head dims"));
  const Tensor q32 = zeros({1, 2, 9, 64}, {.dtype = kF32, .device = cuda});
  CHECK_THROWS_WITH(ops::cudnn_attention_backward(q32, q32, q32, q32, q32, f.lse, 0.125, true),
                    Contains("f16 or bf16"));
}

TEST_CASE("attention path switch: SdpaOptions::path, HG_ATTENTION, and clear errors", "[cudnn-sdpa][sdpa]") {
  const Tensor qc = input({1, 2, 9, 64}, kF16, 51);
  // CPU inputs: flash is the default where the blocked CPU kernels run (math
  // under HG_CPU_MATH=scalar); cudnn cannot run and says why.
  const AttentionPath cpu_default =
      std::string(cpu::flash_attention_cpu_path()) == "reference" ? AttentionPath::math : AttentionPath::flash;
  CHECK(choose_attention_path(qc, qc, qc, {}) == cpu_default);
  CHECK(choose_attention_path(qc.to(kF64), qc.to(kF64), qc.to(kF64), {}) == AttentionPath::math);
  CHECK(choose_attention_path(qc, qc, qc, {.path = AttentionPath::flash}) == AttentionPath::flash);
  CHECK_THROWS_WITH(choose_attention_path(qc, qc, qc, {.path = AttentionPath::cudnn}),
                    Contains("cudnn path was forced") && Contains("CUDA"));
  const Tensor mask = ones({9, 9}, {.dtype = kBool});
  CHECK_THROWS_WITH(choose_attention_path(qc, qc, qc, {.attn_mask = mask, .path = AttentionPath::flash}),
                    Contains("flash path was forced") && Contains("mask"));
  // The environment variable, read on every call; the option wins over it.
  ::setenv("HG_ATTENTION", "flash", 1);
  CHECK(choose_attention_path(qc, qc, qc, {}) == AttentionPath::flash);
  CHECK(choose_attention_path(qc, qc, qc, {.path = AttentionPath::math}) == AttentionPath::math);
  ::setenv("HG_ATTENTION", "cudnn", 1);
  CHECK_THROWS_WITH(choose_attention_path(qc, qc, qc, {}), Contains("HG_ATTENTION") && Contains("cudnn"));
  ::setenv("HG_ATTENTION", "fastest", 1);
  CHECK_THROWS_WITH(choose_attention_path(qc, qc, qc, {}), Contains("HG_ATTENTION=fastest"));
  ::unsetenv("HG_ATTENTION");
  CHECK(choose_attention_path(qc, qc, qc, {}) == cpu_default);
  if (!has_cuda()) return;
  const Device cuda = Device::cuda(0);
  const Tensor q = qc.to(cuda);
  // CUDA: flash stays the default; cudnn runs when forced (where supported).
  CHECK(choose_attention_path(q, q, q, {}) == AttentionPath::flash);
  const std::string skip = cudnn_skip_reason();
  if (skip.empty()) {
    ::setenv("HG_ATTENTION", "cudnn", 1);
    CHECK(choose_attention_path(q, q, q, {}) == AttentionPath::cudnn);
    ::unsetenv("HG_ATTENTION");
  }
  // Unsupported inputs name the reason: head dim, dtype, misaligned rows, mask.
  const Tensor q96 = zeros({1, 2, 9, 96}, {.dtype = kF16, .device = cuda});
  CHECK_THROWS_WITH(choose_attention_path(q96, q96, q96, {.path = AttentionPath::cudnn}),
                    Contains("head dims 64 and 128"));
  const Tensor q32 = zeros({1, 2, 9, 64}, {.dtype = kF32, .device = cuda});
  CHECK_THROWS_WITH(choose_attention_path(q32, q32, q32, {.path = AttentionPath::cudnn}), Contains("f16 or bf16"));
  const Tensor flat = zeros({2 * 9 * 64 + 1}, {.dtype = kF16, .device = cuda});
  const Tensor qm = flat.narrow(0, 1, 2 * 9 * 64).view({1, 2, 9, 64});
  CHECK_THROWS_WITH(choose_attention_path(qm, q, q, {.path = AttentionPath::cudnn}), Contains("16-byte aligned"));
  CHECK_THROWS_WITH(choose_attention_path(q, q, q, {.attn_mask = mask.to(cuda), .path = AttentionPath::cudnn}),
                    Contains("mask"));
  CHECK_THROWS_WITH(ops::cudnn_attention_forward(q96, q96, q96, 0.1, false), Contains("head dims"));
}
