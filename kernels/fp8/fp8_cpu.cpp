// CPU fp8 kernels: the oracle of the CUDA ones (Note [fp8 scaled casts] and
// Note [fp8 GEMM] in kernels/fp8/fp8.h). The element rules are the shared
// HG_HOST_DEVICE helpers of kernels/fp8/fp8.h and core/float8.h; the per-tensor
// cast, the hot one of fp8 training, runs them in a branch-free form
// (Fp8Lanes below, the same bits: test_fp8 checks them on every f16 value and
// on random f32 patterns), in chunks over the thread pool.
// The GEMM widens exactly and calls sgemm.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/cpu/loops.h"
#include "kernels/fp8/fp8.h"

namespace hg::cpu {

namespace {

template <typename S>
uint32_t amax_bits(const S* x, int64_t n) {
  uint32_t best = 0;
  for (int64_t i = 0; i < n; ++i) best = std::max(best, fp8_abs_bits(static_cast<float>(x[i])));
  return best;
}

// fp8_quantize<Q>(x, s) (saturating for finite x, the format's own overflow
// for inf/NaN x) and fp8_clips<Q>(x, s) in one evaluation, as selects
// instead of branches (random data mispredicts the element rule's branches;
// GCC 12 does not vectorise this loop at the library's SSE2 baseline, whose
// 8-, 16- and 32-bit lanes mix). For v = x * s:
//   normal |v| (biased f32 exponent >= the format's smallest normal's): the
//     f32 bits re-biased to the fp8 exponent, the 23 - kMant dropped mantissa
//     bits rounded to nearest even by the add-and-shift of the bits (a carry
//     moves into the exponent, as it should);
//   smaller |v|: |v| * 2^(bias + kMant - 1), below 2^kMant, is |v| in units
//     of the smallest subnormal (exact: a power-of-two scale); adding 2^23
//     rounds it to an integer, nearest even, in the f32 add itself, and the
//     sum's low mantissa bits are that integer (2^kMant: the smallest normal);
//   a magnitude beyond kMaxBits overflows: +-max for finite x (and counted as
//     clipped), the format's overflow pattern for inf x; NaN v gives S.1111111.
template <typename Q>
struct Fp8Lanes;
template <typename F>
struct Fp8LanesOf {
  static constexpr int kExp = F::kExp, kMant = F::kMant;
  static constexpr uint32_t kMaxBits = F::kMaxBits, kOverflowBits = F::kOverflowBits;
  static constexpr uint32_t kBias = (1u << (kExp - 1)) - 1u;
  static constexpr uint32_t kMinNormalFexp = 127u + 1u - kBias;
  static constexpr uint32_t kDrop = 23u - kMant;
  static constexpr float kSubScale = static_cast<float>(1u << (kBias + kMant - 1u));
  static constexpr float kTwo23 = 8388608.0f;

  // The bits of q; clipped gets 1 where fp8_clips would say so.
  static inline uint8_t bits(float x, float s, uint32_t& clipped) {
    const float v = x * s;
    const uint32_t vb = detail::float_bits(v);
    const uint32_t sign = (vb >> 24) & 0x80u;
    const uint32_t abs = vb & 0x7fffffffu;
    const bool x_finite = (detail::float_bits(x) & 0x7f800000u) != 0x7f800000u;
    const uint32_t rebased = abs - ((kMinNormalFexp - 1u) << 23);
    const uint32_t normal = (rebased + ((1u << (kDrop - 1u)) - 1u) + ((rebased >> kDrop) & 1u)) >> kDrop;
    const uint32_t sub = detail::float_bits(detail::bits_float(abs) * kSubScale + kTwo23) - detail::float_bits(kTwo23);
    const uint32_t mag = (abs >> 23) < kMinNormalFexp ? sub : normal;
    const bool nan = abs > 0x7f800000u;
    const bool over = mag > kMaxBits;
    const uint32_t out = nan ? 0x7fu : (over ? (x_finite ? kMaxBits : kOverflowBits) : mag);
    clipped = (x_finite && (over || nan)) ? 1u : 0u;
    return static_cast<uint8_t>(sign | out);
  }
};
template <>
struct Fp8Lanes<float8_e4m3> : Fp8LanesOf<detail::E4M3Format> {};
template <>
struct Fp8Lanes<float8_e5m2> : Fp8LanesOf<detail::E5M2Format> {};

// Elements per chunk of the parallel cast (each chunk reduces its own amax
// and clip count, then the chunks' are combined: the order does not matter,
// max and integer sums are exact).
constexpr int64_t kCastChunk = 16384;

}  // namespace

void fp8_update_scales_(const Fp8UpdateArgs& a) {
  if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;
  for (int64_t slot = 0; slot < a.n; ++slot) {
    fp8_update_slot(a.history, a.length, a.n, slot, a.scale, a.scale_inv, a.max_finite, a.margin_factor, a.compute);
  }
}

void fp8_amax(const Tensor& x, const Tensor& amax) {
  dispatch_fp8_source(x.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    *amax.data<float>() = detail::bits_float(amax_bits(x.data<S>(), x.numel()));
  });
}

void fp8_cast(const Tensor& q, const Tensor& x, const Tensor& scale, const Tensor& amax, const Tensor& saturated) {
  const float s = *scale.data<float>();
  const int64_t n = x.numel();
  dispatch_fp8_source(x.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    dispatch_fp8(q.dtype(), [&](auto q_tag) {
      using Q = decltype(q_tag);
      const S* in = x.data<S>();
      auto* out = static_cast<uint8_t*>(q.data_ptr());
      const int64_t chunks = (n + kCastChunk - 1) / kCastChunk;
      std::vector<uint32_t> best(static_cast<size_t>(chunks), 0);
      std::vector<int64_t> clipped(static_cast<size_t>(chunks), 0);
      parallel_for(chunks, n >= kParallelGrain, [&](int64_t c) {
        const int64_t lo = c * kCastChunk, hi = std::min(n, lo + kCastChunk);
        uint32_t chunk_best = 0, chunk_clipped = 0;
        for (int64_t i = lo; i < hi; ++i) {
          const float v = static_cast<float>(in[i]);
          uint32_t clip = 0;
          out[i] = Fp8Lanes<Q>::bits(v, s, clip);
          chunk_best = std::max(chunk_best, fp8_abs_bits(v));
          chunk_clipped += clip;
        }
        best[static_cast<size_t>(c)] = chunk_best;
        clipped[static_cast<size_t>(c)] = chunk_clipped;
      });
      uint32_t all_best = 0;
      int64_t all_clipped = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        all_best = std::max(all_best, best[static_cast<size_t>(c)]);
        all_clipped += clipped[static_cast<size_t>(c)];
      }
      *amax.data<float>() = detail::bits_float(all_best);
      if (saturated.defined()) *saturated.data<int64_t>() += all_clipped;
    });
  });
}

void fp8_cast_blockwise(const Tensor& q, const Tensor& scale_inv, const Tensor& x, const Fp8BlockArgs& g) {
  const float max_finite = fp8_max(q.dtype());
  dispatch_fp8_source(x.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    dispatch_fp8(q.dtype(), [&](auto q_tag) {
      using Q = decltype(q_tag);
      const S* in = x.data<S>();
      Q* out = static_cast<Q*>(q.data_ptr());
      float* inv = scale_inv.data<float>();
      for (int64_t br = 0; br < g.grid_rows; ++br) {
        const int64_t r0 = br * g.block_rows, r1 = std::min(g.rows, r0 + g.block_rows);
        for (int64_t bc = 0; bc < g.grid_cols; ++bc) {
          const int64_t c0 = bc * kFp8BlockCols, c1 = std::min(g.cols, c0 + kFp8BlockCols);
          uint32_t best = 0;
          for (int64_t r = r0; r < r1; ++r) best = std::max(best, amax_bits(in + r * g.cols + c0, c1 - c0));
          const float s = fp8_block_scale(detail::bits_float(best), max_finite);
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t c = c0; c < c1; ++c)
              out[r * g.cols + c] = fp8_quantize<Q>(static_cast<float>(in[r * g.cols + c]), s);
          }
          inv[br * g.grid_cols + bc] = 1.0f / s;
        }
      }
    });
  });
}

void fp8_dequantize(const Tensor& out, const Tensor& q, const Tensor& scale_inv, const Fp8BlockArgs* g) {
  const float* inv = scale_inv.data<float>();
  dispatch_fp8(q.dtype(), [&](auto q_tag) {
    using Q = decltype(q_tag);
    dispatch_floating(out.dtype(), "fp8_dequantize", [&](auto o_tag) {
      using O = decltype(o_tag);
      const Q* in = static_cast<const Q*>(q.data_ptr());
      O* o = out.data<O>();
      if (g == nullptr) {
        const float s = inv[0];
        const int64_t n = q.numel();
        for (int64_t i = 0; i < n; ++i) o[i] = convert_value<O>(static_cast<float>(in[i]) * s);
        return;
      }
      for (int64_t r = 0; r < g->rows; ++r) {
        for (int64_t c = 0; c < g->cols; ++c) {
          const float s = inv[(r / g->block_rows) * g->grid_cols + c / kFp8BlockCols];
          o[r * g->cols + c] = convert_value<O>(static_cast<float>(in[r * g->cols + c]) * s);
        }
      }
    });
  });
}

void fp8_linear(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, const Tensor& bias) {
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  const float scale = *a_scale_inv.data<float>() * *b_scale_inv.data<float>();
  // Widen each operand once (exact, through a 256-entry table), then the f32
  // GEMM (sgemm: fp32 accumulation; each product of two fp8 values is exact
  // in f32, so only the order of the sums differs from cuda-emu's k order),
  // then * (sa * sb) and + bias in f32 and one rounding to the output.
  auto widen = [](const Tensor& q, std::vector<float>& dst) {
    float table[256];
    dispatch_fp8(q.dtype(), [&](auto tag) {
      using Q = decltype(tag);
      for (int v = 0; v < 256; ++v) table[v] = static_cast<float>(Q::from_bits(static_cast<uint8_t>(v)));
    });
    const auto* p = static_cast<const uint8_t*>(q.data_ptr());
    const int64_t count = q.numel();
    dst.resize(static_cast<size_t>(count));
    float* d = dst.data();
    const int64_t chunks = (count + kCastChunk - 1) / kCastChunk;
    parallel_for(chunks, count >= kParallelGrain, [&](int64_t c) {
      const int64_t lo = c * kCastChunk, hi = std::min(count, lo + kCastChunk);
      for (int64_t i = lo; i < hi; ++i) d[i] = table[p[i]];
    });
  };
  std::vector<float> wa, wb, acc(static_cast<size_t>(m * n));
  widen(a, wa);
  widen(b, wb);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, wa.data(), static_cast<int>(k), wb.data(), static_cast<int>(k), 0.0f, acc.data(),
              static_cast<int>(n));
  std::vector<float> bias_f;
  if (bias.defined()) bias_f = bias.to(kF32).to_vector<float>();
  dispatch_floating(out.dtype(), "fp8_linear", [&](auto o_tag) {
    using O = decltype(o_tag);
    O* o = out.data<O>();
    const float* bias_p = bias_f.empty() ? nullptr : bias_f.data();
    parallel_for(m, m * n >= kParallelGrain, [&](int64_t i) {
      for (int64_t j = 0; j < n; ++j) {
        float v = scale * acc[static_cast<size_t>(i * n + j)];
        if (bias_p != nullptr) v += bias_p[j];
        o[i * n + j] = convert_value<O>(v);
      }
    });
  });
}

}  // namespace hg::cpu
