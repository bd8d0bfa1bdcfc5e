// CPU fp8 kernels: the oracle of the CUDA ones (Note [fp8 scaled casts] and
// Note [fp8 GEMM] in kernels/fp8.h). Plain loops (the GEMM: exact widening,
// then sgemm); the element rules are the shared HG_HOST_DEVICE helpers of
// kernels/fp8.h and core/float8.h.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/fp8.h"

namespace hg::cpu {

namespace {

template <typename S>
uint32_t amax_bits(const S* x, int64_t n) {
  uint32_t best = 0;
  for (int64_t i = 0; i < n; ++i) best = std::max(best, fp8_abs_bits(static_cast<float>(x[i])));
  return best;
}

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
      Q* out = static_cast<Q*>(q.data_ptr());
      uint32_t best = 0;
      int64_t clipped = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(in[i]);
        best = std::max(best, fp8_abs_bits(v));
        clipped += fp8_clips<Q>(v, s) ? 1 : 0;
        out[i] = fp8_quantize<Q>(v, s);
      }
      *amax.data<float>() = detail::bits_float(best);
      if (saturated.defined()) *saturated.data<int64_t>() += clipped;
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
    const auto count = static_cast<size_t>(q.numel());
    dst.resize(count);
    for (size_t i = 0; i < count; ++i) dst[i] = table[p[i]];
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
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float v = scale * acc[static_cast<size_t>(i * n + j)];
        if (!bias_f.empty()) v += bias_f[static_cast<size_t>(j)];
        o[i * n + j] = convert_value<O>(v);
      }
    }
  });
}

}  // namespace hg::cpu
