// fp8 tensors (Note [fp8 is storage only]): casts to and from every dtype on
// the CPU and the CUDA backend agree with the element rule of core/float8.h,
// printing, and every arithmetic entry point refusing fp8 with an hg::Error
// that names the op and the dtype.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/float8.h"
#include "core/tensor.h"
#include "kernels/fp8/fp8.h"
#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Contains;

namespace {

// Values that exercise rounding, subnormals, overflow and specials.
std::vector<float> awkward_values() {
  return {0.0f,
          -0.0f,
          1.0f,
          -1.0625f,
          1.0625f,
          3.0f,
          448.0f,
          464.0f,
          470.0f,
          -500.0f,
          57344.f,
          61440.f,
          1e6f,
          0x1p-9f,
          0x1p-10f,
          0x1p-16f,
          0.3f,
          -2.71828f,
          std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()};
}

template <typename T>
std::vector<uint8_t> expected_bits(const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (float x : v) out.push_back(T(x).bits());
  return out;
}

std::vector<uint8_t> bits_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(host.data_ptr());
  return std::vector<uint8_t>(p, p + host.numel());
}

// NaN patterns differ only in where they come from; compare them as a class.
bool same_fp8(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType dtype) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = dtype == kF8E4M3 ? float(float8_e4m3::from_bits(a[i])) : float(float8_e5m2::from_bits(a[i]));
    const float y = dtype == kF8E4M3 ? float(float8_e4m3::from_bits(b[i])) : float(float8_e5m2::from_bits(b[i]));
    if (std::isnan(x) != std::isnan(y)) return false;
    if (!std::isnan(x) && a[i] != b[i]) return false;
  }
  return true;
}

std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
#if defined(HG_WITH_CUDA)
  d.push_back(Device::cuda(0));
#endif
  return d;
}

}  // namespace

TEST_CASE("fp8 tensors: casts from f32, f16, bf16 and f64 follow the element rule", "[kernels][fp8]") {
  const std::vector<float> v = awkward_values();
  const Tensor f32 = from_vector(v);
  for (const Device dev : devices()) {
    for (const DType from : {kF32, kF16, kBF16, kF64}) {
      const Tensor src = f32.to(from).to(dev);
      // The reference: the source values (already rounded to `from`) through the value type.
      std::vector<float> rounded;
      for (double x : src.to(Device::cpu()).to_vector<double>()) rounded.push_back(static_cast<float>(x));
      INFO(dev.str() << " from " << from);
      CHECK(same_fp8(bits_of(src.to(kF8E4M3)), expected_bits<float8_e4m3>(rounded), kF8E4M3));
      CHECK(same_fp8(bits_of(src.to(kF8E5M2)), expected_bits<float8_e5m2>(rounded), kF8E5M2));
    }
  }
}

TEST_CASE("fp8 tensors: every pattern widens exactly, to every dtype, on every device", "[kernels][fp8]") {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  for (const DType fp8 : {kF8E4M3, kF8E5M2}) {
    Tensor host = empty({16, 16}, {.dtype = fp8});
    std::memcpy(host.data_ptr(), all.data(), all.size());
    for (const Device dev : devices()) {
      INFO(dev.str() << " " << fp8);
      const Tensor t = host.to(dev);
      const std::vector<float> f = t.to(kF32).to(Device::cpu()).to_vector<float>();
      for (size_t i = 0; i < 256; ++i) {
        const float want =
            fp8 == kF8E4M3 ? float(float8_e4m3::from_bits(all[i])) : float(float8_e5m2::from_bits(all[i]));
        if (std::isnan(want)) {
          CHECK(std::isnan(f[i]));
        } else {
          CHECK(f[i] == want);
        }
      }
      // f16 and bf16 hold every fp8 value (E5M2's range is f16's); the round trip is exact.
      for (const DType wide : {kF16, kBF16, kF64, kF32}) {
        CHECK(same_fp8(bits_of(t.to(wide).to(fp8)), all, fp8));
      }
      // A transposed (strided) read and the other fp8 format.
      CHECK(same_fp8(bits_of(t.transpose(0, 1).contiguous()), bits_of(host.transpose(0, 1).contiguous()), fp8));
      const DType other = fp8 == kF8E4M3 ? kF8E5M2 : kF8E4M3;
      CHECK(same_fp8(bits_of(t.to(other)), bits_of(host.to(kF32).to(other)), other));
    }
  }
}

TEST_CASE("fp8 tensors print with their dtype", "[kernels][fp8]") {
  std::ostringstream os;
  os << from_vector(std::vector<float>{1.0f, -0.5f, 448.0f}).to(kF8E4M3);
  CHECK(os.str() == "tensor([  1.0000,  -0.5000, 448.0000], dtype=f8e4m3)");
  std::ostringstream os2;
  os2 << from_vector(std::vector<float>{2.0f, 3.0f}).to(kF8E5M2);
  CHECK(os2.str() == "tensor([2., 3.], dtype=f8e5m2)");
}

TEST_CASE("arithmetic on fp8 tensors is refused, naming the op and the dtype", "[kernels][fp8]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    const Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).to(kF8E4M3).to(dev);
    // (Catch2 matchers are combined inline: a stored combination would dangle.)
    CHECK_THROWS_WITH(ops::add(a, a), Contains("add") && Contains("f8e4m3") && Contains("storage format"));
    CHECK_THROWS_WITH(ops::exp(a), Contains("exp") && Contains("f8e4m3") && Contains("storage format"));
    CHECK_THROWS_WITH(ops::sum(a), Contains("f8e4m3") && Contains("storage format"));
    CHECK_THROWS_WITH(ops::matmul(a, a), Contains("f8e4m3"));
    // Mixed with a wider float, the usual promotion applies: the op runs in f32.
    const Tensor b = from_vector(std::vector<float>{1, 1, 1, 1}, {2, 2}).to(dev);
    CHECK(ops::add(a, b).to(Device::cpu()).to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  }
}

// ---- scaled casts ------------------------------------------------------------

namespace {

std::vector<double> host_values(const Tensor& t) { return t.to(Device::cpu()).to(kF64).to_vector<double>(); }

// The element contract of the scaled casts: the f32 product x * s (one f32
// rounding of the exact product), then the saturating conversion (tested
// exhaustively in tests/core/test_float8.cpp).
uint8_t reference_bits(DType fp8, double x, float s) {
  const auto product = static_cast<float>(static_cast<double>(static_cast<float>(x)) * static_cast<double>(s));
  return fp8 == kF8E4M3 ? float8_e4m3::from_float_saturate(product).bits()
                        : float8_e5m2::from_float_saturate(product).bits();
}

float scalar_of(const Tensor& t) { return t.to(Device::cpu()).item<float>(); }

Tensor f32_scalar(float v, Device dev) { return from_vector(std::vector<float>{v}).to(dev); }

// Values over many binades (so saturation and fp8 subnormals both occur), and a NaN-free input.
Tensor spread_input(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<double> v = make_input(shape, kF64, Domain::kAny, seed).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], static_cast<int>(i % 23) - 12);
  return from_vector(v, shape, {.dtype = kF64}).to(dtype);
}

}  // namespace

TEST_CASE("fp8_cast: q = sat(x * scale) and amax = max |x| in one pass", "[kernels][fp8]") {
  for (const Device dev : devices()) {
    for (const DType src : {kF32, kBF16, kF16}) {
      for (const DType fp8 : {kF8E4M3, kF8E5M2}) {
        for (const float s : {1.0f, 0.37f, 4096.0f}) {  // 4096: many elements saturate
          INFO(dev.str() << " " << src << " -> " << fp8 << " scale " << s);
          const Tensor x = spread_input({37, 29}, src, 3).to(dev);
          const Tensor amax = f32_scalar(-1.0f, dev);  // overwritten, not max-ed with
          const Tensor q = ops::fp8_cast(x, fp8, f32_scalar(s, dev), amax);
          CHECK(q.dtype() == fp8);
          const std::vector<double> xs = host_values(x);
          const std::vector<uint8_t> got = bits_of(q);
          double want_amax = 0;
          int64_t mismatches = 0;
          for (size_t i = 0; i < xs.size(); ++i) {
            want_amax = std::max(want_amax, std::fabs(xs[i]));
            mismatches += got[i] != reference_bits(fp8, xs[i], s);
          }
          CHECK(mismatches == 0);
          CHECK(scalar_of(amax) == static_cast<float>(want_amax));
        }
      }
    }
    // amax = 0: an all-zero input; empty input; NaN propagates into amax; fp8_amax alone.
    const Tensor amax = f32_scalar(5.0f, dev);
    const Tensor q0 = ops::fp8_cast(zeros({4, 8}, {.device = dev}), kF8E4M3, f32_scalar(1e30f, dev), amax);
    CHECK(scalar_of(amax) == 0.0f);
    CHECK(bits_of(q0) == std::vector<uint8_t>(32, 0));
    (void)ops::fp8_cast(zeros({0}, {.device = dev}), kF8E4M3, f32_scalar(1.0f, dev), amax);
    CHECK(scalar_of(amax) == 0.0f);
    const Tensor with_nan =
        from_vector(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN(), -3.0f}).to(dev);
    (void)ops::fp8_cast(with_nan, kF8E5M2, f32_scalar(1.0f, dev), amax);
    CHECK(std::isnan(scalar_of(amax)));
    ops::fp8_amax(from_vector(std::vector<float>{1.0f, -7.5f, 2.0f}).to(kBF16).to(dev), amax);
    CHECK(scalar_of(amax) == 7.5f);
    CHECK_THROWS_WITH(ops::fp8_cast(with_nan, kF16, f32_scalar(1.0f, dev), amax), Contains("f8e4m3 or f8e5m2"));
    CHECK_THROWS_WITH(ops::fp8_cast(with_nan.to(kF64), kF8E4M3, f32_scalar(1.0f, dev), amax),
                      Contains("f32, f16 or bf16"));
    CHECK_THROWS_WITH(ops::fp8_cast(with_nan, kF8E4M3, zeros({2}, {.device = dev}), amax), Contains("scale"));
  }
}

TEST_CASE("fp8_cast on large inputs: every f16 value and random f32 patterns, bit for bit with the element rule",
          "[kernels][fp8]") {
  // The CPU cast runs a branch-free form of fp8_quantize / fp8_clips in
  // parallel chunks (kernels/fp8/fp8_cpu.cpp); these inputs are past the parallel
  // grain and hold every class: zeros, fp8 subnormals and f32 subnormals,
  // ties, saturation, inf and NaN. The reference is the scalar element rule of
  // kernels/fp8/fp8.h (itself checked against an integer-only reference in
  // tests/core/test_float8.cpp), one element at a time.
  std::vector<uint16_t> f16_bits(65536);
  for (size_t i = 0; i < f16_bits.size(); ++i) f16_bits[i] = static_cast<uint16_t>(i);
  std::vector<float> f32_values(1 << 18);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (float& v : f32_values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto bits = static_cast<uint32_t>(state >> 32);
    std::memcpy(&v, &bits, sizeof v);
  }
  std::vector<float> f16_values(f16_bits.size());
  for (size_t i = 0; i < f16_bits.size(); ++i) f16_values[i] = static_cast<float>(half::from_bits(f16_bits[i]));
  const Tensor f16_input = from_vector(f16_values).to(kF16);
  const Tensor f32_input = from_vector(f32_values);
  for (const Tensor* x : {&f16_input, &f32_input}) {
    const std::vector<float> xs = x->to(kF32).to_vector<float>();
    for (const DType fp8 : {kF8E4M3, kF8E5M2}) {
      for (const float s : {1.0f, 0.3712f, 3.0e4f, std::numeric_limits<float>::quiet_NaN()}) {
        INFO(x->dtype() << " -> " << fp8 << " scale " << s);
        const Tensor amax = f32_scalar(-1.0f, Device::cpu());
        const Tensor saturated = zeros({1}, {.dtype = kI64});
        const Tensor q = ops::fp8_cast(*x, fp8, f32_scalar(s, Device::cpu()), amax, saturated);
        const std::vector<uint8_t> got = bits_of(q);
        std::vector<uint8_t> want(xs.size());
        int64_t want_clipped = 0;
        uint32_t want_amax = 0;
        dispatch_fp8(fp8, [&](auto tag) {
          using Q = decltype(tag);
          for (size_t i = 0; i < xs.size(); ++i) {
            want[i] = fp8_quantize<Q>(xs[i], s).bits();
            want_clipped += fp8_clips<Q>(xs[i], s) ? 1 : 0;
            want_amax = std::max(want_amax, fp8_abs_bits(xs[i]));
          }
        });
        // NaN as a class: NaN x NaN (a NaN scale) keeps either operand's sign, as the compiler orders the product.
        CHECK(same_fp8(got, want, fp8));
        CHECK(saturated.item<int64_t>() == want_clipped);
        // amax orders |x| by its bits, so a NaN anywhere wins (its payload may differ by the path that widened it).
        float want_amax_value = 0;
        std::memcpy(&want_amax_value, &want_amax, sizeof want_amax_value);
        const float got_amax = scalar_of(amax);
        if (std::isnan(want_amax_value)) {
          CHECK(std::isnan(got_amax));
        } else {
          CHECK(got_amax == want_amax_value);
        }
      }
    }
  }
}

TEST_CASE("fp8_cast_blockwise: per 1x128 and 128x128 block scales, partial edge blocks", "[kernels][fp8]") {
  for (const Device dev : devices()) {
    for (const Fp8Block block : {Fp8Block::row_1x128, Fp8Block::tile_128x128}) {
      for (const Shape& shape : {Shape{3, 300}, Shape{130, 260}, Shape{1, 128}}) {
        for (const DType fp8 : {kF8E4M3, kF8E5M2}) {
          const int64_t bm = block == Fp8Block::row_1x128 ? 1 : 128;
          INFO(dev.str() << " " << fp8 << " block rows " << bm << " shape " << shape[0] << "x" << shape[1]);
          Tensor x_host = spread_input(shape, kF32, 11);
          // One all-zero block (amax = 0): the first 128 columns of row 0 (and the tile around it).
          x_host.narrow(0, 0, 1).narrow(1, 0, 128).zero_();
          if (bm == 128) x_host.narrow(0, 0, std::min<int64_t>(128, shape[0])).narrow(1, 0, 128).zero_();
          const auto [q, scale_inv] = ops::fp8_cast_blockwise(x_host.to(dev), fp8, block);
          const int64_t rows = shape[0], cols = shape[1];
          const int64_t gr = (rows + bm - 1) / bm, gc = (cols + 127) / 128;
          REQUIRE(scale_inv.sizes() == Shape({gr, gc}));
          const std::vector<double> xs = host_values(x_host);
          const std::vector<double> inv = host_values(scale_inv);
          const std::vector<uint8_t> got = bits_of(q);
          const float fmax = fp8 == kF8E4M3 ? 448.0f : 57344.0f;
          int64_t mismatches = 0;
          for (int64_t br = 0; br < gr; ++br) {
            for (int64_t bc = 0; bc < gc; ++bc) {
              double amax = 0;
              for (int64_t r = br * bm; r < std::min(rows, (br + 1) * bm); ++r)
                for (int64_t c = bc * 128; c < std::min(cols, (bc + 1) * 128); ++c)
                  amax = std::max(amax, std::fabs(xs[static_cast<size_t>(r * cols + c)]));
              const float s = amax > 0 ? fmax / static_cast<float>(amax) : 1.0f;
              CHECK(inv[static_cast<size_t>(br * gc + bc)] == static_cast<double>(1.0f / s));
              for (int64_t r = br * bm; r < std::min(rows, (br + 1) * bm); ++r)
                for (int64_t c = bc * 128; c < std::min(cols, (bc + 1) * 128); ++c)
                  mismatches += got[static_cast<size_t>(r * cols + c)] !=
                                reference_bits(fp8, xs[static_cast<size_t>(r * cols + c)], s);
            }
          }
          CHECK(inv[0] == 1.0);  // the all-zero block keeps scale 1
          CHECK(mismatches == 0);
          // Dequantised: within the format's rounding of each value. A
          // saturation-free block rounds x * s to 3 (E4M3) or 2 (E5M2)
          // mantissa bits: |deq - x| <= u |x| (u = 2^-4 or 2^-3) in the
          // normal range, <= half the smallest subnormal (2^-10 or 2^-17)
          // times scale_inv below it; plus two f32 roundings (x * s, q * s_inv).
          const Tensor deq = ops::fp8_dequantize_blockwise(q, scale_inv, block, kF32);
          const std::vector<double> back = host_values(deq);
          const double u = fp8 == kF8E4M3 ? 0x1p-4 : 0x1p-3;
          const double sub = fp8 == kF8E4M3 ? 0x1p-10 : 0x1p-17;
          int64_t outside = 0;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              const size_t i = static_cast<size_t>(r * cols + c);
              const double si = inv[static_cast<size_t>((r / bm) * gc + c / 128)];
              const double bound = (u + 0x1p-22) * std::fabs(xs[i]) + sub * si;
              outside += std::fabs(back[i] - xs[i]) > bound;
            }
          }
          CHECK(outside == 0);
        }
      }
    }
    CHECK_THROWS_WITH(ops::fp8_cast_blockwise(zeros({2, 3, 4}, {.device = dev}), kF8E4M3, Fp8Block::row_1x128),
                      Contains("2-D"));
  }
}

TEST_CASE("fp8_dequantize: out = round(float(q) * scale_inv), every output dtype", "[kernels][fp8]") {
  for (const Device dev : devices()) {
    const Tensor x = spread_input({9, 7}, kF32, 5).to(dev);
    const Tensor amax = f32_scalar(0.0f, dev);
    const Tensor q = ops::fp8_cast(x, kF8E4M3, f32_scalar(8.0f, dev), amax);
    const std::vector<double> qs = host_values(q);
    for (const DType out : {kF32, kBF16, kF16}) {
      INFO(dev.str() << " " << out);
      const Tensor deq = ops::fp8_dequantize(q, f32_scalar(0.125f, dev), out);
      std::vector<double> want;
      for (double v : qs) want.push_back(static_cast<double>(static_cast<float>(v) * 0.125f));
      CHECK(host_values(deq) == round_to(want, out));
    }
  }
}

// ---- the fp8 GEMM --------------------------------------------------------------

namespace {

struct Quantized {
  Tensor q;
  float scale_inv;
};

Quantized quantize_for_gemm(const Shape& shape, DType fp8, uint64_t seed, Device dev, double magnitude) {
  Tensor x = make_input(shape, kF32, Domain::kAny, seed);
  x = x.to(kF64).to(kF32);
  const double amax = 3.0 * magnitude;
  std::vector<double> v = x.to(kF64).to_vector<double>();
  for (double& e : v) e *= magnitude;
  const float s = fp8 == kF8E4M3 ? static_cast<float>(448.0 / amax) : static_cast<float>(57344.0 / amax);
  const Tensor amax_t = f32_scalar(0.0f, dev);
  const Tensor q =
      ops::fp8_cast(from_vector(v, shape, {.dtype = kF64}).to(kF32).to(dev), fp8, f32_scalar(s, dev), amax_t);
  return {q, 1.0f / s};
}

}  // namespace

TEST_CASE("fp8_linear matches the f64 product within the derived bound", "[kernels][fp8]") {
  struct Case {
    int64_t m, n, k;
    DType a, b, out;
    bool bias;
  };
  const std::vector<Case> cases = {
      {5, 16, 32, kF8E4M3, kF8E4M3, kBF16, false}, {33, 48, 80, kF8E4M3, kF8E4M3, kF32, true},
      {7, 32, 144, kF8E5M2, kF8E4M3, kF16, true},  {16, 16, 16, kF8E4M3, kF8E5M2, kBF16, true},
      {3, 16, 0, kF8E4M3, kF8E4M3, kF32, true},    {1, 64, 272, kF8E4M3, kF8E4M3, kF32, false},
  };
  for (const Device dev : devices()) {
    for (const Case& c : cases) {
      INFO(dev.str() << " M=" << c.m << " N=" << c.n << " K=" << c.k << " " << c.a << " x " << c.b << " -> " << c.out
                     << (c.bias ? " + bias" : ""));
      const Quantized a = quantize_for_gemm({c.m, c.k}, c.a, 21, dev, 0.5);
      const Quantized b = quantize_for_gemm({c.n, c.k}, c.b, 22, dev, 2.0);
      const DType bias_dtype = c.out == kF16 ? kF16 : kBF16;
      const Tensor bias = c.bias ? make_input({c.n}, kF32, Domain::kAny, 23).to(bias_dtype).to(dev) : Tensor();
      const Tensor out =
          ops::fp8_linear(a.q, b.q, f32_scalar(a.scale_inv, dev), f32_scalar(b.scale_inv, dev), c.out, bias);
      REQUIRE(out.sizes() == Shape({c.m, c.n}));
      CHECK(out.dtype() == c.out);
      const std::vector<double> av = host_values(a.q), bv = host_values(b.q), got = host_values(out);
      const std::vector<double> bias_v = c.bias ? host_values(bias) : std::vector<double>(c.n, 0.0);
      // Note [fp8 GEMM]: |out - ref| <= e_acc + 3 u32 (|ref| + |bias| + e_acc) for the f32 scale, bias
      // add and accumulation, then u_out of that for the output rounding.
      const double u32 = 0x1p-24;
      const double u_out = c.out == kF32 ? u32 : c.out == kBF16 ? 0x1p-8 : 0x1p-11;
      const double gamma = static_cast<double>(c.k) * u32 / (1.0 - static_cast<double>(c.k) * u32);
      const double sab = static_cast<double>(a.scale_inv) * static_cast<double>(b.scale_inv);
      int64_t outside = 0;
      double worst = 0;
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double dot = 0, abs_dot = 0;
          for (int64_t q = 0; q < c.k; ++q) {
            const double p = av[static_cast<size_t>(i * c.k + q)] * bv[static_cast<size_t>(j * c.k + q)];
            dot += p;
            abs_dot += std::fabs(p);
          }
          const double bj = bias_v[static_cast<size_t>(j)];
          const double ref = sab * dot + bj;
          const double e_acc = gamma * sab * abs_dot;
          const double inner = e_acc + 3 * u32 * (std::fabs(ref) + std::fabs(bj) + e_acc);
          const double bound = inner + u_out * (std::fabs(ref) + inner);
          const double err = std::fabs(got[static_cast<size_t>(i * c.n + j)] - ref);
          outside += err > bound;
          worst = std::max(worst, bound > 0 ? err / bound : err);
        }
      }
      INFO("worst error / bound " << worst);
      CHECK(outside == 0);
    }
    // amax = 0: an all-zero operand (scale_inv 1) gives exactly the bias.
    const Tensor zero_a = zeros({4, 32}, {.device = dev}).to(kF8E4M3);
    const Quantized b = quantize_for_gemm({16, 32}, kF8E4M3, 9, dev, 1.0);
    const Tensor bias = make_input({16}, kF32, Domain::kAny, 4).to(kBF16).to(dev);
    const Tensor out = ops::fp8_linear(zero_a, b.q, f32_scalar(1.0f, dev), f32_scalar(b.scale_inv, dev), kBF16, bias);
    CHECK(host_values(out) == host_values(bias.view({1, 16}).expand({4, 16}).contiguous()));
    // cuBLASLt's rules, on every backend.
    const Tensor one = f32_scalar(1.0f, dev);
    const Tensor e5 = zeros({16, 32}, {.device = dev}).to(kF8E5M2);
    CHECK_THROWS_WITH(ops::fp8_linear(e5, e5, one, one, kBF16), Contains("E5M2 x E5M2"));
    const Tensor k24 = zeros({16, 24}, {.device = dev}).to(kF8E4M3);
    CHECK_THROWS_WITH(ops::fp8_linear(k24, k24, one, one, kBF16), Contains("multiples of 16"));
    CHECK_THROWS_WITH(ops::fp8_linear(zero_a, b.q, one, one, kF32, bias.to(kF32)), Contains("bias must be bf16"));
    CHECK_THROWS_WITH(ops::fp8_linear(zero_a, b.q, one, one, kF8E4M3), Contains("output dtype"));
  }
}

// ---- delayed scaling ------------------------------------------------------------

namespace {

// Transformer Engine's delayed-scaling update written as its PyTorch code
// reads (transformer_engine/pytorch/fp8.py: _default_get_amax_and_update_history
// and _default_sf_compute), on plain vectors:
//   amax = amax_history.max(dim=0) | amax_history[0]
//   amax_history = roll(amax_history, -1, 0); amax_history[0] = 0
//   sf = (fp8_max / amax) / 2**margin
//   sf = where(amax > 0, sf, scale); sf = where(isfinite(amax), sf, scale)
//   sf = where(isinf(sf), finfo(float32).max, sf); scale_inv = 1 / sf
struct TeReference {
  int64_t length, n;
  std::vector<float> history;  // [length, n]
  std::vector<float> scale, scale_inv, fp8_max;
  int margin;
  bool most_recent;

  void update() {
    for (int64_t j = 0; j < n; ++j) {
      float amax = history[static_cast<size_t>(j)];
      if (!most_recent) {
        for (int64_t r = 0; r < length; ++r) {
          const float v = history[static_cast<size_t>(r * n + j)];
          if (std::isnan(v) || v > amax) amax = v;  // torch.max propagates NaN
        }
      }
      std::vector<float> column;
      for (int64_t r = 0; r < length; ++r) column.push_back(history[static_cast<size_t>(r * n + j)]);
      std::rotate(column.begin(), column.begin() + 1, column.end());  // roll(-1)
      column[0] = 0.0f;
      for (int64_t r = 0; r < length; ++r) history[static_cast<size_t>(r * n + j)] = column[static_cast<size_t>(r)];
      float sf = (fp8_max[static_cast<size_t>(j)] / amax) / static_cast<float>(std::pow(2.0, margin));
      if (!(amax > 0.0f)) sf = scale[static_cast<size_t>(j)];
      if (!std::isfinite(amax)) sf = scale[static_cast<size_t>(j)];
      if (std::isinf(sf)) sf = std::numeric_limits<float>::max();
      scale[static_cast<size_t>(j)] = sf;
      scale_inv[static_cast<size_t>(j)] = 1.0f / sf;
    }
  }
};

std::vector<float> floats_of(const Tensor& t) { return t.to(Device::cpu()).contiguous().to_vector<float>(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("fp8 delayed scaling follows Transformer Engine's update step by step", "[kernels][fp8][recipe]") {
  for (const Device dev : devices()) {
    for (const bool most_recent : {false, true}) {
      INFO(dev.str() << (most_recent ? " most_recent" : " max"));
      const int64_t length = 4, n = 3;  // three slots: input (E4M3), weight (E4M3), gradient (E5M2)
      const int margin = 1;
      TeReference ref{length, n,          std::vector<float>(length * n, 0.0f), {1, 1, 1}, {1, 1, 1}, {448, 448, 57344},
                      margin, most_recent};
      Tensor history = zeros({length, n}, {.device = dev});
      Tensor scale = ones({n}, {.device = dev}), scale_inv = ones({n}, {.device = dev});
      const Tensor fp8_max = from_vector(ref.fp8_max).to(dev);
      Tensor found_inf = zeros({1}, {.device = dev});
      const DType formats[3] = {kF8E4M3, kF8E4M3, kF8E5M2};
      // Per step, the amax each slot's tensor will have (0: amax = 0; inf: a non-finite tensor).
      const float inf = std::numeric_limits<float>::infinity();
      const std::vector<std::array<float, 3>> amaxes = {
          {2.0f, 0.5f, 1e-3f}, {3.0f, 0.25f, 4e-3f}, {0.0f, 0.75f, 2e-3f}, {1.0f, 0.5f, inf},
          {6.0f, 0.5f, 1e-4f}, {0.5f, 8.0f, 5e-2f},  {1.5f, 0.1f, 3e-3f},
      };
      const size_t overflow_step = 4;  // the GradScaler saw inf/NaN: nothing may change
      for (size_t step = 0; step < amaxes.size(); ++step) {
        INFO("step " << step);
        // The step's scaled casts: each writes its amax into row 0 of its slot.
        for (int64_t j = 0; j < n; ++j) {
          const float a = amaxes[step][static_cast<size_t>(j)];
          const Tensor x = from_vector(std::vector<float>{a * 0.5f, -a, a * 0.25f}).to(dev);
          (void)ops::fp8_cast(x, formats[j], scale.narrow(0, j, 1), history.select(0, 0).narrow(0, j, 1));
          ref.history[static_cast<size_t>(j)] = std::fabs(a);
        }
        CHECK(same_bits(floats_of(history), ref.history));
        const bool overflow = step == overflow_step;
        found_inf.fill_(overflow ? 1.0 : 0.0);
        const std::vector<float> before_h = floats_of(history), before_s = floats_of(scale),
                                 before_i = floats_of(scale_inv);
        ops::fp8_update_scales_(history, scale, scale_inv, fp8_max, found_inf, margin,
                                most_recent ? Fp8AmaxCompute::kMostRecent : Fp8AmaxCompute::kMax);
        if (overflow) {
          CHECK(same_bits(floats_of(history), before_h));
          CHECK(same_bits(floats_of(scale), before_s));
          CHECK(same_bits(floats_of(scale_inv), before_i));
          continue;  // the reference is not updated either
        }
        ref.update();
        CHECK(same_bits(floats_of(history), ref.history));
        CHECK(same_bits(floats_of(scale), ref.scale));
        CHECK(same_bits(floats_of(scale_inv), ref.scale_inv));
      }
      // By hand: slot 0's window at the last update holds 1.5 as its largest
      // amax (6.0 came from the skipped step and was overwritten), margin 1.
      if (!most_recent) CHECK(floats_of(scale)[0] == (448.0f / 1.5f) / 2.0f);
    }
  }
}

#if defined(HG_WITH_CUDA)
TEST_CASE("an fp8 step (casts, GEMM, scale update) reads nothing back to the host", "[kernels][fp8][recipe]") {
  const Device dev = Device::cuda(0);
  const int64_t n = 2;
  Tensor history = zeros({8, n}, {.device = dev});
  Tensor scale = ones({n}, {.device = dev}), scale_inv = ones({n}, {.device = dev});
  const Tensor fp8_max = from_vector(std::vector<float>{448, 448}).to(dev);
  const Tensor found_inf = zeros({1}, {.device = dev});
  const Tensor x = make_input({32, 64}, kBF16, Domain::kAny, 1).to(dev);
  const Tensor w = make_input({48, 64}, kBF16, Domain::kAny, 2).to(dev);
  const Tensor bias = make_input({48}, kBF16, Domain::kAny, 3).to(dev);
  cuda::synchronize(0);
  const cuda::HostSyncCounts before = cuda::host_sync_counts();
  for (int step = 0; step < 3; ++step) {
    const Tensor qx = ops::fp8_cast(x, kF8E4M3, scale.narrow(0, 0, 1), history.select(0, 0).narrow(0, 0, 1));
    const Tensor qw = ops::fp8_cast(w, kF8E4M3, scale.narrow(0, 1, 1), history.select(0, 0).narrow(0, 1, 1));
    (void)ops::fp8_linear(qx, qw, scale_inv.narrow(0, 0, 1), scale_inv.narrow(0, 1, 1), kBF16, bias);
    ops::fp8_update_scales_(history, scale, scale_inv, fp8_max, found_inf, 0, Fp8AmaxCompute::kMax);
  }
  const cuda::HostSyncCounts after = cuda::host_sync_counts();
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.synchronizations == before.synchronizations);
}
#endif
