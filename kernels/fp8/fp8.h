// fp8 kernels: scaled casts to E4M3/E5M2 with the amax of the input computed
// in the same pass, the inverse (dequantising) cast, and the fp8 GEMM.
//
// Note [fp8 scaled casts]
// fp8 holds 2-3 significant bits over a narrow range (E4M3: 2^-9 .. 448,
// E5M2: 2^-16 .. 57344), so a tensor is stored as q = sat(x * s) with a
// per-tensor (or per-block) f32 scale s chosen to map the tensor's range onto
// the format's, and read back as x ~ q * s_inv, s_inv = 1/s. "sat" is the
// saturating conversion of Note [fp8 conversions] for a finite x (a finite
// overflow -> +-max: the value is clipped) and the format's own conversion
// for a non-finite x (NaN stays NaN; +-inf becomes +-inf in E5M2 and NaN in
// E4M3), so an overflow upstream (a loss-scaled gradient that reached inf)
// stays visible to the GradScaler's check instead of being clipped away.
//
//   per tensor (fp8_cast):  q = sat(x * scale[0]); amax[0] = max |x| over x
//     (NaN if any |x| is NaN); with a `saturated` counter (i64 [1]), the
//     number of clipped values (fp8_clips: finite x whose x * scale rounds
//     beyond fp8_max) is added to it. scale comes from outside (delayed scaling: a
//     recipe derives it from earlier steps' amaxes; current scaling: from
//     this tensor's amax, a separate fp8_amax pass first). One read of x,
//     one write of q; amax is combined across thread blocks with an atomic
//     max on the bits of |x| (non-negative floats, inf and NaN order as
//     their bits), so the result does not depend on the block order.
//   per block (fp8_cast_blockwise): x [M, K] in blocks of 1 x 128 (a row
//     segment) or 128 x 128 (a tile), edge blocks partial; for each block
//     amax_b = max |x|, s_b = fp8_max / amax_b (1 when amax_b is 0 or not
//     finite), q = sat(x * s_b), scale_inv[b] = 1 / s_b (f32 division,
//     the DeepSeek-V3 fine-grained recipe). One kernel: each block reduces
//     its amax, then casts.
//   dequantise (fp8_dequantize): x = float(q) * scale_inv (per tensor: [1];
//     per block: [ceil(M/bm), ceil(K/128)]), rounded once to the output dtype.
//
// Note [fp8 GEMM]
// fp8_linear(a, b, a_scale_inv, b_scale_inv): out[M, N] = a_scale_inv[0] *
// b_scale_inv[0] * (a @ b^T) (+ bias[N]), a [M, K] and b [N, K] row-major
// fp8 (E4M3 or E5M2, not both E5M2), fp32 accumulation, one rounding to the
// output dtype (bf16, f16 or f32). This is cuBLASLt's fp8 "TN" problem in
// row-major terms: y = x W^T with x and W as stored, so a Linear forward
// needs no transpose. Requirements (cuBLASLt's fp8 rules, enforced for both
// backends so a model that runs on the CPU runs on the GPU): K and N
// multiples of 16 (16-byte leading dimensions for 1-byte elements), both
// operands contiguous; the bias is bf16 for bf16 and f32 outputs and f16 for
// f16 outputs (cuBLASLt's fp8 bias types); CUDA needs compute capability
// 8.9 or newer (amp::supported says so). Scales are device pointers
// (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER): no host read.
//   CPU: each operand widened exactly to f32, then sgemm (fp32 accumulation;
//   each product of two fp8 values is exact in f32, 4 x 4 significant bits);
//   then * (sa * sb) and + bias in f32, one rounding to the output.
//   cuda-emu: the cuBLASLt stand-in (runtime/emu) sums the same exact
//   products in k order.
//   GPU: cuBLASLt with CUBLASLT_MATMUL_DESC_FAST_ACCUM left off (partial sums
//   promoted to fp32 registers); its order of summation differs.
// Error bound (tests/kernels/test_fp8.cpp): against the exact f64 product,
// |out - ref| <= gamma(K) * sa * sb * sum_k |a_ik b_jk| + u_out * |ref| (+ the
// bias's rounding), gamma(K) = K u32 / (1 - K u32), u32 = 2^-24, u_out the
// output's unit roundoff.
#pragma once

#include <cfloat>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/float8.h"
#include "core/half.h"
#include "core/macros.h"
#include "core/tensor.h"

namespace hg {

enum class Fp8Block : uint8_t { row_1x128, tile_128x128 };

inline constexpr int64_t kFp8BlockCols = 128;

// Element rules shared by both backends (Note [fp8 scaled casts]).
// |x| as bits that order like the values, NaN above inf.
HG_HOST_DEVICE inline uint32_t fp8_abs_bits(float x) { return detail::float_bits(x) & 0x7fffffffu; }
// A block's scale: fp8_max / amax; 1 when amax is 0 or not finite; FLT_MAX
// when the quotient overflows (a block of tiny values).
HG_HOST_DEVICE inline float fp8_block_scale(float amax, float max_finite) {
  if (!(amax > 0.0f) || amax - amax != 0.0f) return 1.0f;
  const float s = max_finite / amax;
  return s - s == 0.0f ? s : FLT_MAX;
}
template <typename Q>
HG_HOST_DEVICE inline Q fp8_quantize(float x, float scale) {
  const float v = x * scale;
  return x - x == 0.0f ? Q::from_float_saturate(v) : Q(v);
}
// Whether fp8_quantize clips x: x finite and x * scale beyond what rounds to
// the format's max (the format's own conversion would overflow to NaN or inf,
// |v| > 464 in E4M3, |v| >= 61440 in E5M2), so saturation brought it back
// to +-max.
template <typename Q>
HG_HOST_DEVICE inline bool fp8_clips(float x, float scale) {
  if (x - x != 0.0f) return false;
  const float back = static_cast<float>(Q(x * scale));
  return back - back != 0.0f;
}
// Note [fp8 delayed scaling]
// The state of n scaled tensors (a recipe's slots: input, weight and output
// gradient of each fp8 layer), all f32 on one device:
//   history    [L, n]  amax history; row 0 is the current step's (the scaled
//                      casts write it), rows 1.. the L-1 steps before
//   scale      [n]     s, the cast multiplier;  scale_inv [n]  1/s
//   fp8_max    [n]     448 or 57344, the slot's format's largest value
// fp8_update_scales_ (one thread per slot, one launch per step), Transformer
// Engine's delayed-scaling update:
//   amax  = max over the L rows (kMax) or row 0 (kMostRecent)
//   s'    = (fp8_max / amax) / 2^margin, in f32
//   s'    = s if amax is 0 or not finite; FLT_MAX if s' overflowed
//   history rolls one row up (row i <- row i+1, the last row <- row 0) and
//   row 0 becomes 0, ready for the next step's amax
//   scale = s', scale_inv = 1 / s'
// With found_inf (f32 [1], the GradScaler's overflow flag of this step)
// nonzero nothing changes: the step is skipped like the optimizer's, and the
// next step's casts overwrite row 0.
enum class Fp8AmaxCompute : uint8_t { kMax, kMostRecent };

HG_HOST_DEVICE inline void fp8_update_slot(float* history, int64_t length, int64_t n, int64_t slot, float* scale,
                                           float* scale_inv, const float* max_finite, float margin_factor,
                                           Fp8AmaxCompute compute) {
  float amax = history[slot];
  if (compute == Fp8AmaxCompute::kMax) {
    for (int64_t r = 1; r < length; ++r) {
      const float v = history[r * n + slot];
      amax = v > amax || v != v ? v : amax;  // NaN sticks
    }
  }
  float s = scale[slot];
  if (amax > 0.0f && amax - amax == 0.0f) {
    s = (max_finite[slot] / amax) / margin_factor;
    if (s - s != 0.0f) s = FLT_MAX;
  }
  const float current = history[slot];
  for (int64_t r = 0; r + 1 < length; ++r) history[r * n + slot] = history[(r + 1) * n + slot];
  if (length > 1) history[(length - 1) * n + slot] = current;
  history[slot] = 0.0f;
  scale[slot] = s;
  scale_inv[slot] = 1.0f / s;
}

namespace ops {

// Note [fp8 scaled casts]. x: f32/f16/bf16, any shape; fp8: kF8E4M3 or
// kF8E5M2; scale: f32 [1] on x's device; amax: f32 [1] (written);
// saturated: i64 [1] on x's device or undefined (the count of clipped
// values is added to it). Returns q (contiguous, x's shape).
Tensor fp8_cast(const Tensor& x, DType fp8, const Tensor& scale, const Tensor& amax,
                const Tensor& saturated = Tensor());
// qt [K, Mp] = q^T for q [M, K] fp8, its columns M .. Mp-1 zero, Mp = M
// rounded up to a multiple of `pad` (the K-major operand the fp8 GEMM of a
// weight gradient needs, Note [fp8 GEMM]: its reduction runs over M, which
// must be a multiple of 16). One strided copy: M K bytes read, K Mp written.
Tensor fp8_transpose_padded(const Tensor& q, int64_t pad = 16);
// amax[0] = max |x| alone (the first pass of current scaling).
void fp8_amax(const Tensor& x, const Tensor& amax);
// Blockwise: x [M, K]; returns {q [M, K], scale_inv f32 [ceil(M/bm), ceil(K/128)]}.
std::pair<Tensor, Tensor> fp8_cast_blockwise(const Tensor& x, DType fp8, Fp8Block block);
// The inverse: per tensor (scale_inv [1]) or per block (the layout above).
Tensor fp8_dequantize(const Tensor& q, const Tensor& scale_inv, DType out_dtype);
Tensor fp8_dequantize_blockwise(const Tensor& q, const Tensor& scale_inv, Fp8Block block, DType out_dtype);

// Note [fp8 delayed scaling]. found_inf: f32 [1] or undefined (never skip).
void fp8_update_scales_(const Tensor& history, const Tensor& scale, const Tensor& scale_inv, const Tensor& fp8_max,
                        const Tensor& found_inf, int margin, Fp8AmaxCompute compute);

// Note [fp8 GEMM].
Tensor fp8_linear(const Tensor& a, const Tensor& b, const Tensor& a_scale_inv, const Tensor& b_scale_inv,
                  DType out_dtype, const Tensor& bias = Tensor());

}  // namespace ops

// The largest finite value of an fp8 dtype (448 or 57344).
float fp8_max(DType fp8);

// Backends (arguments checked, outputs allocated, inputs contiguous).
struct Fp8BlockArgs {
  int64_t rows = 0, cols = 0;  // x is [rows, cols]
  int64_t block_rows = 1;      // 1 or 128 (block columns are 128)
  int64_t grid_rows = 0, grid_cols = 0;
};
struct Fp8UpdateArgs {
  float* history;
  float* scale;
  float* scale_inv;
  const float* max_finite;
  const float* found_inf;  // null: never skip
  int64_t length, n;
  float margin_factor;  // 2^margin
  Fp8AmaxCompute compute;
};
// The dtype dispatch of the fp8 kernels on both backends (host code): the
// 16/32-bit source of a cast, and the fp8 format.
template <typename Fn>
void dispatch_fp8_source(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32:
      return fn(float{});
    case DType::F16:
      return fn(half{});
    case DType::BF16:
      return fn(bfloat16{});
    default:
      HG_FAIL("fp8: no cast from ", t);
  }
}

template <typename Fn>
void dispatch_fp8(DType t, Fn&& fn) {
  switch (t) {
    case DType::F8E4M3:
      return fn(float8_e4m3{});
    case DType::F8E5M2:
      return fn(float8_e5m2{});
    default:
      HG_FAIL("fp8: ", t, " is not an fp8 dtype");
  }
}

namespace cpu {
void fp8_update_scales_(const Fp8UpdateArgs& args);
void fp8_cast(const Tensor& q, const Tensor& x, const Tensor& scale, const Tensor& amax, const Tensor& saturated);
void fp8_amax(const Tensor& x, const Tensor& amax);
void fp8_cast_blockwise(const Tensor& q, const Tensor& scale_inv, const Tensor& x, const Fp8BlockArgs& g);
void fp8_dequantize(const Tensor& out, const Tensor& q, const Tensor& scale_inv, const Fp8BlockArgs* g);
void fp8_linear(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, const Tensor& bias);
}  // namespace cpu
#if defined(HG_WITH_CUDA)
namespace cuda {
void fp8_update_scales_(const Fp8UpdateArgs& args, Device device);
void fp8_cast(const Tensor& q, const Tensor& x, const Tensor& scale, const Tensor& amax, const Tensor& saturated);
void fp8_amax(const Tensor& x, const Tensor& amax);
void fp8_cast_blockwise(const Tensor& q, const Tensor& scale_inv, const Tensor& x, const Fp8BlockArgs& g);
void fp8_dequantize(const Tensor& out, const Tensor& q, const Tensor& scale_inv, const Fp8BlockArgs* g);
void fp8_linear(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, const Tensor& bias);
}  // namespace cuda
#endif

}  // namespace hg
