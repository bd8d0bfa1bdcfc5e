// The fused attention kernels of kernels/attention/flash_attention.h (CPU and CUDA:
// cuda-emu runs the WMMA kernels of kernels/attention/flash_attention.cu) against
// an f64 reference computed here from the already-rounded inputs: naive
// softmax(scale Q K^T + causal mask) V, its log-sum-exp and the analytic
// gradients. Shapes cover L = S in {1, 17, 64, 257, 1024}, L != S both ways,
// head dims 64 and 128, causal and not. Tolerances: tests/kernels/tolerance.h.
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
#include "kernels/attention/flash_attention_tiles.h"
#include "runtime/cpu/threads.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/attention/flash_attention.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

struct Case {
  int64_t b, h, l, s, d;
  bool causal;
};

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
  // sum of |term| of each output's sum (|P_ij| |v_j| for out, and so on):
  // the scale of the error of rounding each P_ij or dS_ij once.
  std::vector<double> out_mag, dq_mag, dk_mag, dv_mag;
};

// f64 attention on [BH, L, D] / [BH, S, D] values, top-left causal mask.
Reference reference(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& d_out, double scale) {
  const int64_t bh = c.b * c.h, l = c.l, s = c.s, d = c.d;
  Reference r;
  r.out.assign(static_cast<size_t>(bh * l * d), 0.0);
  r.lse.assign(static_cast<size_t>(bh * l), 0.0);
  r.dq.assign(static_cast<size_t>(bh * l * d), 0.0);
  r.dk.assign(static_cast<size_t>(bh * s * d), 0.0);
  r.dv.assign(static_cast<size_t>(bh * s * d), 0.0);
  r.out_mag = r.dq_mag = r.out;
  r.dk_mag = r.dv_mag = r.dv;
  std::vector<double> p(static_cast<size_t>(s)), dp(static_cast<size_t>(s));
  for (int64_t b = 0; b < bh; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      const double* qi = &q[static_cast<size_t>((b * l + i) * d)];
      const double* doi = &d_out[static_cast<size_t>((b * l + i) * d)];
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        double acc = 0;
        for (int64_t x = 0; x < d; ++x) acc += qi[x] * k[static_cast<size_t>((b * s + j) * d + x)];
        p[static_cast<size_t>(j)] = (c.causal && j > i) ? -std::numeric_limits<double>::infinity() : acc * scale;
        m = std::max(m, p[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - m));
      r.lse[static_cast<size_t>(b * l + i)] = m + std::log(sum);
      double delta = 0;
      for (int64_t j = 0; j < s; ++j) {
        const double pj = p[static_cast<size_t>(j)] /= sum;
        double acc = 0;
        for (int64_t x = 0; x < d; ++x) {
          const double vx = v[static_cast<size_t>((b * s + j) * d + x)];
          r.out[static_cast<size_t>((b * l + i) * d + x)] += pj * vx;
          r.out_mag[static_cast<size_t>((b * l + i) * d + x)] += pj * std::fabs(vx);
          acc += doi[x] * vx;
        }
        dp[static_cast<size_t>(j)] = acc;
        delta += pj * acc;
      }
      for (int64_t j = 0; j < s; ++j) {
        const double pj = p[static_cast<size_t>(j)];
        const double ds = pj * (dp[static_cast<size_t>(j)] - delta);
        for (int64_t x = 0; x < d; ++x) {
          const size_t kj = static_cast<size_t>((b * s + j) * d + x);
          r.dq[static_cast<size_t>((b * l + i) * d + x)] += scale * ds * k[kj];
          r.dk[kj] += scale * ds * qi[x];
          r.dv[kj] += pj * doi[x];
          r.dq_mag[static_cast<size_t>((b * l + i) * d + x)] += scale * std::fabs(ds * k[kj]);
          r.dk_mag[kj] += scale * std::fabs(ds * qi[x]);
          r.dv_mag[kj] += pj * std::fabs(doi[x]);
        }
      }
    }
  }
  return r;
}

// Inputs in [-1.2, 1.2): scores stay O(1) after the 1/sqrt(D) scale, so the
// softmax is neither uniform nor one-hot.
Tensor input(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<double> x = make_input(shape, kF64, Domain::kAny, seed).to_vector<double>();
  for (double& e : x) e *= 0.4;
  return from_vector(x, shape, {.dtype = dtype});
}

// The CUDA kernels round P and dS to the 16-bit input type before the
// tensor-core products (the FlashAttention-2 precision contract, see
// kernels/attention/flash_attention.h), so an output sum_j x_j y_j carries, beyond the
// table's error of a 16-bit reduction, the rounding of each x_j: at most
// u sum_j |x_j y_j| with u the unit roundoff (2^-11 f16, 2^-8 bf16). That
// term, computed from the f64 reference, is added per element; the CPU
// kernels keep P and dS in fp32 and get the table's tolerance alone.
// (Without it, bf16 gradients with cancellation miss by ~1e-3 absolute.)
std::string compare_rounded_terms(const std::vector<double>& actual, const std::vector<double>& expected,
                                  const std::vector<double>& magnitude, DType dt) {
  const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
  const double u = dt == kBF16 ? 0x1p-8 : 0x1p-11;
  std::vector<double> slack(actual.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double allowed = tol.atol + tol.rtol * std::fabs(expected[i]) + u * magnitude[i];
    // Report through compare_values: a passing element compares equal.
    slack[i] = std::fabs(actual[i] - expected[i]) <= allowed ? expected[i] : actual[i];
  }
  return compare_values(slack, expected, Tolerance{0.0, 0.0});
}

// A case's q, k, v and d_out (seeds seed .. seed + 3) on the host.
struct Inputs {
  Tensor q, k, v, d_out;
};
Inputs inputs_of(const Case& c, DType dt, uint64_t seed) {
  return {input({c.b, c.h, c.l, c.d}, dt, seed), input({c.b, c.h, c.s, c.d}, dt, seed + 1),
          input({c.b, c.h, c.s, c.d}, dt, seed + 2), input({c.b, c.h, c.l, c.d}, dt, seed + 3)};
}

std::string case_name(const Case& c, Device dev, DType dt) {
  return label(dev, dt,
               "B" + std::to_string(c.b) + " H" + std::to_string(c.h) + " L" + std::to_string(c.l) + " S" +
                   std::to_string(c.s) + " D" + std::to_string(c.d) + (c.causal ? " causal" : ""));
}

void check_case(const Case& c, Device dev, DType dt) {
  INFO(case_name(c, dev, dt));
  const uint64_t seed = static_cast<uint64_t>(c.l * 131 + c.s * 7 + c.d + (c.causal ? 1 : 0));
  const auto [q, k, v, d_out] = inputs_of(c, dt, seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const Reference ref = reference(c, values_of(q), values_of(k), values_of(v), values_of(d_out), scale);
  const Tensor qd = q.to(dev), kd = k.to(dev), vd = v.to(dev);
  const ops::FlashForward f = ops::flash_attention_forward(qd, kd, vd, scale, c.causal);
  REQUIRE(f.out.sizes() == q.sizes());
  REQUIRE(f.out.dtype() == dt);
  REQUIRE(f.lse.sizes() == Shape({c.b, c.h, c.l}));
  const ops::FlashBackward g = ops::flash_attention_backward(d_out.to(dev), qd, kd, vd, f.out, f.lse, scale, c.causal);
  const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
  const Tolerance lse_tol = tolerance_for(dt == kF64 ? kF64 : kF32, OpKind::kReduction);
  // lse is fp32 from 16-bit inputs: exact up to the fp32 sums of the scores.
  CHECK(compare_values(values_of(f.lse), ref.lse, dt == kF64 || dt == kF32 ? lse_tol : Tolerance{1e-5, 1e-5}) == "");
  if (dev.is_cpu()) {
    CHECK(compare_values(values_of(f.out), ref.out, tol) == "");
    CHECK(compare_values(values_of(g.dq), ref.dq, tol) == "");
    CHECK(compare_values(values_of(g.dk), ref.dk, tol) == "");
    CHECK(compare_values(values_of(g.dv), ref.dv, tol) == "");
  } else {
    CHECK(compare_rounded_terms(values_of(f.out), ref.out, ref.out_mag, dt) == "");
    CHECK(compare_rounded_terms(values_of(g.dq), ref.dq, ref.dq_mag, dt) == "");
    CHECK(compare_rounded_terms(values_of(g.dk), ref.dk, ref.dk_mag, dt) == "");
    CHECK(compare_rounded_terms(values_of(g.dv), ref.dv, ref.dv_mag, dt) == "");
  }
}

std::vector<DType> dtypes_on(Device dev) {
  if (dev.is_cpu()) return {kF32, kF64, kF16, kBF16};
  return {kF16, kBF16};
}

}  // namespace

TEST_CASE("flash attention: small shapes against the f64 reference", "[flash]") {
  const std::vector<Case> cases{
      {1, 2, 1, 1, 64, false},   {1, 1, 1, 17, 64, true},  {2, 1, 17, 17, 64, true},  {1, 2, 17, 17, 128, false},
      {1, 1, 17, 40, 128, true}, {1, 1, 40, 17, 64, true}, {1, 1, 64, 64, 128, true},
  };
  for (Device dev : test_devices()) {
    for (DType dt : dtypes_on(dev)) {
      for (const Case& c : cases) check_case(c, dev, dt);
    }
  }
}

TEST_CASE("flash attention: tile edges (257) and L != S", "[flash]") {
  const std::vector<Case> cases{
      {1, 1, 257, 257, 64, true},
      {1, 1, 257, 100, 128, false},
      {1, 1, 100, 257, 64, true},
      {1, 1, 257, 257, 128, false},
  };
  for (Device dev : test_devices()) {
    for (DType dt : dev.is_cpu() ? std::vector<DType>{kF32, kF16, kBF16} : std::vector<DType>{kF16, kBF16}) {
      for (const Case& c : cases) check_case(c, dev, dt);
    }
  }
}

TEST_CASE("flash attention: L = S = 1024", "[flash]") {
  for (Device dev : test_devices()) {
    check_case({1, 1, 1024, 1024, 64, true}, dev, kF16);
  }
}

namespace {

// Restores the CPU math path, ISA cap and thread count when a test ends.
struct CpuPathGuard {
  cpu::CpuMath math = cpu::cpu_math();
  cpu::VecIsa cap = cpu::cpu_isa_cap();
  int threads = get_num_threads();
  CpuPathGuard() = default;
  CpuPathGuard(const CpuPathGuard&) = delete;
  CpuPathGuard& operator=(const CpuPathGuard&) = delete;
  ~CpuPathGuard() {
    cpu::set_cpu_math(math);
    cpu::set_cpu_isa_cap(cap);
    set_num_threads(threads);
  }
};

bool cpu_has(cpu::VecIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case cpu::VecIsa::sse2:
      return true;
    case cpu::VecIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case cpu::VecIsa::avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

struct CpuPath {
  std::string name;  // what cpu::flash_attention_cpu_path() must say
  cpu::CpuMath math;
  cpu::VecIsa cap;
};

// The CPU kernels this build and CPU can run: the reference row kernels
// (the scalar math switch) and the blocked tiles at every ISA up to the CPU's.
std::vector<CpuPath> cpu_paths() {
  std::vector<CpuPath> paths{{"reference", cpu::CpuMath::scalar, cpu::VecIsa::avx512}};
  const CpuPathGuard guard;
  cpu::set_cpu_math(cpu::CpuMath::sleef);
  cpu::set_cpu_isa_cap(cpu::VecIsa::sse2);
  if (std::string(cpu::flash_attention_cpu_path()) == "reference") return paths;  // built without SLEEF
  paths.push_back({"blocked-sse2", cpu::CpuMath::sleef, cpu::VecIsa::sse2});
  if (cpu_has(cpu::VecIsa::avx2)) paths.push_back({"blocked-avx2", cpu::CpuMath::sleef, cpu::VecIsa::avx2});
  if (cpu_has(cpu::VecIsa::avx512)) paths.push_back({"blocked-avx512", cpu::CpuMath::sleef, cpu::VecIsa::avx512});
  return paths;
}

}  // namespace

// Every CPU kernel (the forced switches of kernels/cpu/README.md, "CPU math: SLEEF
// and ISA dispatch") against the f64 reference: several query and key
// blocks, partial blocks, L != S both ways, both head dims, causal and not.
TEST_CASE("flash attention: every CPU path against the f64 reference", "[flash]") {
  const CpuPathGuard guard;
  const std::vector<Case> cases{
      {1, 2, 130, 70, 64, true},  {2, 1, 70, 130, 128, false}, {1, 1, 200, 200, 64, false},
      {1, 1, 65, 193, 128, true}, {1, 1, 3, 2, 64, true},
  };
  for (const CpuPath& p : cpu_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    INFO(p.name);
    REQUIRE(std::string(cpu::flash_attention_cpu_path()) == p.name);
    for (DType dt : {kF32, kF16, kBF16}) {
      for (const Case& c : cases) check_case(c, Device::cpu(), dt);
    }
  }
}

// The CPU kernels' sums have one order inside each task, so the thread count
// (and the dynamic schedule) cannot change a bit of the results.
TEST_CASE("flash attention: CPU results are bit-identical for any thread count", "[flash]") {
  const CpuPathGuard guard;
  for (const CpuPath& p : cpu_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dt : {kF32, kBF16}) {
      for (bool causal : {false, true}) {
        INFO(p.name << " " << dtype_name(dt) << (causal ? " causal" : ""));
        const Tensor q = input({2, 3, 150, 64}, dt, 41), k = input({2, 3, 150, 64}, dt, 42);
        const Tensor v = input({2, 3, 150, 64}, dt, 43), d_out = input({2, 3, 150, 64}, dt, 44);
        std::vector<std::vector<double>> runs[2];
        for (int run = 0; run < 2; ++run) {
          set_num_threads(run == 0 ? 1 : 3);
          const ops::FlashForward f = ops::flash_attention_forward(q, k, v, 0.125, causal);
          const ops::FlashBackward g = ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, 0.125, causal);
          runs[run] = {values_of(f.out), values_of(f.lse), values_of(g.dq), values_of(g.dk), values_of(g.dv)};
        }
        for (size_t o = 0; o < runs[0].size(); ++o) CHECK(runs[0][o] == runs[1][o]);
      }
    }
  }
}

TEST_CASE("flash attention: cuda agrees with cpu", "[flash]") {
  bool has_cuda = false;
  for (Device dev : test_devices()) has_cuda = has_cuda || dev.is_cuda();
  if (!has_cuda) return;
  for (DType dt : {kF16, kBF16}) {
    INFO(dtype_name(dt));
    const Tensor q = input({2, 2, 70, 64}, dt, 11), k = input({2, 2, 33, 64}, dt, 12);
    const Tensor v = input({2, 2, 33, 64}, dt, 13), d_out = input({2, 2, 70, 64}, dt, 14);
    const ops::FlashForward fc = ops::flash_attention_forward(q, k, v, 0.125, false);
    const ops::FlashBackward gc = ops::flash_attention_backward(d_out, q, k, v, fc.out, fc.lse, 0.125, false);
    const Device cuda = Device::cuda(0);
    const ops::FlashForward fg = ops::flash_attention_forward(q.to(cuda), k.to(cuda), v.to(cuda), 0.125, false);
    const ops::FlashBackward gg =
        ops::flash_attention_backward(d_out.to(cuda), q.to(cuda), k.to(cuda), v.to(cuda), fg.out, fg.lse, 0.125, false);
    const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
    CHECK(compare_values(values_of(fg.out), values_of(fc.out), tol) == "");
    CHECK(compare_values(values_of(fg.lse), values_of(fc.lse), Tolerance{1e-5, 1e-5}) == "");
    CHECK(compare_values(values_of(gg.dq), values_of(gc.dq), tol) == "");
    CHECK(compare_values(values_of(gg.dk), values_of(gc.dk), tol) == "");
    CHECK(compare_values(values_of(gg.dv), values_of(gc.dv), tol) == "");
  }
}

// HG_FLASH_ORDER picks the order in which a grid's blocks take their
// (tile, head, batch): it must change which block computes what, never the
// result. Each order is checked against the f64 reference (a block left out
// or taken twice would show there), then the two against each other bit for bit.
TEST_CASE("flash attention: both block orders give the same bits", "[flash]") {
  for (Device dev : test_devices()) {
    if (!dev.is_cuda()) continue;
    for (const bool causal : {true, false}) {
      const Case c{2, 3, 200, 200, 64, causal};
      const Inputs in = inputs_of(c, kF16, 41);
      const Tensor q = in.q.to(dev), k = in.k.to(dev), v = in.v.to(dev), d_out = in.d_out.to(dev);
      std::vector<std::vector<double>> results[2];
      for (int order = 0; order < 2; ++order) {
        ::setenv("HG_FLASH_ORDER", order == 0 ? "natural" : "heaviest-first", 1);
        INFO(case_name(c, dev, kF16) << (order == 0 ? " natural" : " heaviest-first"));
        check_case(c, dev, kF16);
        const ops::FlashForward f = ops::flash_attention_forward(q, k, v, 0.125, causal);
        const ops::FlashBackward g = ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, 0.125, causal);
        results[order] = {values_of(f.out), values_of(f.lse), values_of(g.dq), values_of(g.dk), values_of(g.dv)};
      }
      CHECK(results[0] == results[1]);
    }
    ::setenv("HG_FLASH_ORDER", "backwards", 1);
    const Tensor q = input({1, 1, 16, 64}, kF16, 45).to(dev);
    CHECK_THROWS_WITH(ops::flash_attention_forward(q, q, q, 0.125, true), Contains("HG_FLASH_ORDER=backwards"));
    ::unsetenv("HG_FLASH_ORDER");
  }
}

// HG_FLASH_FWD_WARP_ROWS picks the forward's warp shape: 8 warps x 16 rows
// or 4 warps x 32 rows (two 16-row fragments per warp sharing each K and V
// fragment). A row's arithmetic is the same either way, so each shape is
// checked against the f64 reference (a fragment computed from the wrong rows,
// or a tile skipped that a fragment sees, would show there) and the two
// against each other bit for bit, causal with L != S, and rows that end
// inside a fragment. Head dim 128 always runs 16 rows per warp (the switch
// is accepted and changes nothing there).
TEST_CASE("flash attention: both forward warp shapes give the same bits", "[flash]") {
  for (Device dev : test_devices()) {
    if (!dev.is_cuda()) continue;
    for (const Case& c : {Case{1, 2, 200, 137, 64, true}, Case{2, 1, 77, 250, 64, false},
                          Case{1, 2, 150, 150, 128, true}, Case{1, 1, 40, 300, 128, false}}) {
      const DType dt = c.d == 64 ? kF16 : kBF16;
      const Inputs in = inputs_of(c, dt, 51);
      const Tensor q = in.q.to(dev), k = in.k.to(dev), v = in.v.to(dev);
      std::vector<std::vector<double>> results[2];
      for (int shape = 0; shape < 2; ++shape) {
        ::setenv("HG_FLASH_FWD_WARP_ROWS", shape == 0 ? "16" : "32", 1);
        INFO(case_name(c, dev, dt) << (shape == 0 ? " 16 rows per warp" : " 32 rows per warp"));
        check_case(c, dev, dt);
        const ops::FlashForward f = ops::flash_attention_forward(q, k, v, 0.125, c.causal);
        results[shape] = {values_of(f.out), values_of(f.lse)};
      }
      CHECK(results[0] == results[1]);
    }
    ::setenv("HG_FLASH_FWD_WARP_ROWS", "64", 1);
    const Tensor q = input({1, 1, 16, 64}, kF16, 54).to(dev);
    CHECK_THROWS_WITH(ops::flash_attention_forward(q, q, q, 0.125, true), Contains("HG_FLASH_FWD_WARP_ROWS=64"));
    ::unsetenv("HG_FLASH_FWD_WARP_ROWS");
  }
}

TEST_CASE("flash attention: non-contiguous inputs and B*H = 0", "[flash]") {
  for (Device dev : test_devices()) {
    const DType dt = dev.is_cpu() ? kF32 : kF16;
    INFO(dev.str());
    // [B, L, H, D] storage viewed as [B, H, L, D], as after a head split.
    const Tensor q = input({1, 9, 2, 64}, dt, 21).to(dev).transpose(1, 2);
    const Tensor k = input({1, 5, 2, 64}, dt, 22).to(dev).transpose(1, 2);
    const Tensor v = input({1, 5, 2, 64}, dt, 23).to(dev).transpose(1, 2);
    const ops::FlashForward a = ops::flash_attention_forward(q, k, v, 0.125, true);
    const ops::FlashForward b =
        ops::flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), 0.125, true);
    CHECK(values_of(a.out) == values_of(b.out));
    const Tensor e = zeros({0, 2, 3, 64}, {.dtype = dt, .device = dev});
    const ops::FlashForward z = ops::flash_attention_forward(e, e, e, 0.125, false);
    CHECK(z.out.sizes() == e.sizes());
  }
}

// The fused qkv projection's [B, T, 3, H, D] output, viewed as q, k, v
// [B, H, T, D] without a copy, and a d_out from [B, T, H, D] storage: the
// results must equal those of contiguous copies bit for bit (the CUDA
// kernels read the strides; the CPU path copies), two backward runs must
// agree bit for bit (no atomics), and on CUDA the outputs come back heads
// last, so merging heads is a view. A view whose rows are not 16-byte
// aligned takes the copy path and must agree too.
TEST_CASE("flash attention: the fused qkv layout in place, heads-last outputs, deterministic", "[flash]") {
  for (Device dev : test_devices()) {
    const DType dt = dev.is_cpu() ? kF32 : kF16;
    INFO(dev.str());
    const int64_t b = 2, t = 37, h = 2, d = 64;
    const Tensor qkv = input({b, t, 3, h, d}, dt, 31).to(dev);
    const Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
    const Tensor v = qkv.select(2, 2).transpose(1, 2);
    const Tensor d_out = input({b, t, h, d}, dt, 32).to(dev).transpose(1, 2);
    if (dev.is_cuda()) {
      CHECK(ops::flash_attention_rows_ok(q));
      CHECK(ops::flash_attention_rows_ok(d_out));
    }
    const ops::FlashForward f = ops::flash_attention_forward(q, k, v, 0.125, true);
    const ops::FlashForward fc =
        ops::flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), 0.125, true);
    CHECK(values_of(f.out) == values_of(fc.out));
    CHECK(values_of(f.lse) == values_of(fc.lse));
    const ops::FlashBackward g = ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, 0.125, true);
    const ops::FlashBackward g2 = ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, 0.125, true);
    const ops::FlashBackward gc = ops::flash_attention_backward(d_out.contiguous(), q.contiguous(), k.contiguous(),
                                                                v.contiguous(), fc.out, fc.lse, 0.125, true);
    CHECK(values_of(g.dq) == values_of(gc.dq));
    CHECK(values_of(g.dk) == values_of(gc.dk));
    CHECK(values_of(g.dv) == values_of(gc.dv));
    CHECK(values_of(g.dq) == values_of(g2.dq));
    CHECK(values_of(g.dk) == values_of(g2.dk));
    CHECK(values_of(g.dv) == values_of(g2.dv));
    if (dev.is_cuda()) {
      CHECK(f.out.transpose(1, 2).is_contiguous());
      CHECK(g.dq.transpose(1, 2).is_contiguous());
      CHECK(g.dk.transpose(1, 2).is_contiguous());
      CHECK(g.dv.transpose(1, 2).is_contiguous());
      // Rows 2 bytes off a 16-byte boundary: copied first, same results.
      const Tensor flat = input({b * h * t * d + 1}, dt, 33).to(dev);
      const Tensor qm = flat.narrow(0, 1, b * h * t * d).view({b, h, t, d});
      CHECK_FALSE(ops::flash_attention_rows_ok(qm));
      const ops::FlashForward fm = ops::flash_attention_forward(qm, k, v, 0.125, false);
      const ops::FlashForward fmc = ops::flash_attention_forward(qm.contiguous(), k, v, 0.125, false);
      CHECK(values_of(fm.out) == values_of(fmc.out));
    }
  }
}

TEST_CASE("flash attention: bad input names the shapes", "[flash]") {
  for (Device dev : test_devices()) {
    const DType dt = kF16;
    const Tensor q = zeros({1, 2, 8, 64}, {.dtype = dt, .device = dev});
    const Tensor k = zeros({1, 2, 5, 64}, {.dtype = dt, .device = dev});
    const Tensor q96 = zeros({1, 2, 8, 96}, {.dtype = dt, .device = dev});
    CHECK_THROWS_WITH(ops::flash_attention_forward(q96, q96, q96, 0.1, false),
                      Contains("head dim D = 96") && Contains("[1, 2, 8, 96]"));
    const Tensor k3 = zeros({1, 3, 5, 64}, {.dtype = dt, .device = dev});
    CHECK_THROWS_WITH(ops::flash_attention_forward(q, k3, k3, 0.1, false),
                      Contains("[1, 2, 8, 64]") && Contains("[1, 3, 5, 64]"));
    CHECK_THROWS_WITH(ops::flash_attention_forward(q, k, q, 0.1, false), Contains("k and v"));
    CHECK_THROWS_WITH(ops::flash_attention_forward(q, k.to(kF32), k, 0.1, false), Contains("one dtype"));
    const Tensor qi = zeros({1, 2, 8, 64}, {.dtype = kI64, .device = dev});
    CHECK_THROWS_WITH(ops::flash_attention_forward(qi, qi, qi, 0.1, false), Contains("not supported"));
    if (dev.is_cuda()) {
      const Tensor q32 = zeros({1, 2, 8, 64}, {.dtype = kF32, .device = dev});
      CHECK_THROWS_WITH(ops::flash_attention_forward(q32, q32, q32, 0.1, false), Contains("f32"));
      CHECK_FALSE(ops::flash_attention_supported(q32, q32, q32, false, 0.0));
    }
    const ops::FlashForward f = ops::flash_attention_forward(q, k, k, 0.1, false);
    CHECK_THROWS_WITH(ops::flash_attention_backward(k, q, k, k, f.out, f.lse, 0.1, false), Contains("d_out"));
    CHECK(ops::flash_attention_supported(q, k, k, false, 0.0));
    CHECK_FALSE(ops::flash_attention_supported(q, k, k, true, 0.0));
    CHECK_FALSE(ops::flash_attention_supported(q, k, k, false, 0.1));
    CHECK_FALSE(ops::flash_attention_supported(q96, q96, q96, false, 0.0));
    CHECK_FALSE(ops::flash_attention_supported(q, k3, k3, false, 0.0));
  }
}

// The flash kernels agree with the math path of
// hg::scaled_dot_product_attention (batched GEMMs and the fused softmax
// kernel, run on the CPU in the same dtype) in values and gradients, at
// L = S in {1, 17, 64, 257, 1024}, head dims 64 and 128, causal and not, f16
// and bf16. Both sides chain three roundings to the dtype (scores,
// probabilities, the products), each within the table's reduction row: three
// times the row, as tests/kernels/test_attention.cpp allows the math path
// against f64. The CUDA kernels also round P and dS to 16 bits before the
// tensor-core products where the math path rounds them at other points, so
// on CUDA each element also gets 2 u sum_j |x_j y_j| (see
// compare_rounded_terms), from the f64 reference; that reference costs
// seconds at 1024 under cuda-emu, so CUDA is compared up to 257 here and at
// 1024 against f64 above ("L = S = 1024").
TEST_CASE("flash path agrees with the math path of scaled_dot_product_attention", "[flash][sdpa]") {
  uint64_t seed = 900;
  for (const DType dt : {kF16, kBF16}) {
    Tolerance tol = tolerance_for(dt, OpKind::kReduction);
    tol.rtol *= 3;
    tol.atol *= 3;
    const double u = dt == kBF16 ? 0x1p-8 : 0x1p-11;
    for (const int64_t t : {1, 17, 64, 257, 1024}) {
      for (const int64_t d : {64, 128}) {
        for (const bool causal : {false, true}) {
          const int64_t h = t >= 257 ? 1 : 2;
          const Shape shape{1, h, t, d};
          const Tensor q = input(shape, dt, ++seed), k = input(shape, dt, ++seed), v = input(shape, dt, ++seed);
          const Tensor d_out = input(shape, dt, ++seed);
          // The math path on the CPU, through the differentiable op.
          Tensor qm = q.clone().requires_grad_(), km = k.clone().requires_grad_(), vm = v.clone().requires_grad_();
          const SdpaOptions math_path{.is_causal = causal, .path = AttentionPath::math};
          const Tensor out_math = scaled_dot_product_attention(qm, km, vm, math_path);
          REQUIRE(choose_attention_path(qm, km, vm, math_path) == AttentionPath::math);
          sum(mul(out_math, d_out)).backward();
          const std::vector<std::vector<double>> math{values_of(out_math), values_of(qm.grad()), values_of(km.grad()),
                                                      values_of(vm.grad())};
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          for (const Device dev : test_devices()) {
            if (!dev.is_cpu() && t > 257) continue;
            INFO(label(dev, dt,
                       "L = S = " + std::to_string(t) + ", D = " + std::to_string(d) + (causal ? ", causal" : "")));
            const Tensor qd = q.to(dev), kd = k.to(dev), vd = v.to(dev);
            const ops::FlashForward f = ops::flash_attention_forward(qd, kd, vd, scale, causal);
            const ops::FlashBackward g =
                ops::flash_attention_backward(d_out.to(dev), qd, kd, vd, f.out, f.lse, scale, causal);
            const std::vector<std::vector<double>> flash{
                values_of(f.out.to(Device::cpu())), values_of(g.dq.to(Device::cpu())),
                values_of(g.dk.to(Device::cpu())), values_of(g.dv.to(Device::cpu()))};
            std::vector<std::vector<double>> mags(4);
            if (!dev.is_cpu()) {
              const Case c{1, h, t, t, d, causal};
              const Reference r = reference(c, values_of(q), values_of(k), values_of(v), values_of(d_out), scale);
              mags = {r.out_mag, r.dq_mag, r.dk_mag, r.dv_mag};
            }
            for (size_t o = 0; o < 4; ++o) {
              static constexpr const char* kWhat[] = {"out", "dq", "dk", "dv"};
              INFO(kWhat[o]);
              std::vector<double> slack(flash[o].size());
              for (size_t i = 0; i < slack.size(); ++i) {
                const double e = math[o][i];
                const double allowed =
                    tol.atol + tol.rtol * std::fabs(e) + (mags[o].empty() ? 0.0 : 2.0 * u * mags[o][i]);
                slack[i] = std::fabs(flash[o][i] - e) <= allowed ? e : flash[o][i];
              }
              CHECK(compare_values(slack, math[o], Tolerance{0.0, 0.0}) == "");
            }
          }
        }
      }
    }
  }
}
