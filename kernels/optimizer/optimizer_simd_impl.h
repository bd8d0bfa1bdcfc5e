// The Adam/AdamW kernels of kernels/optimizer/optimizer_simd.h, written once over a
// GCC vector type and compiled once per ISA. Included only by
// optimizer_avx2.cpp and optimizer_avx512.cpp, each of which first defines
//   HG_OPT_NS           the namespace of its table (hg::cpu::HG_OPT_NS::table())
//   HG_OPT_NAME         the table's name ("avx2", "avx512")
//   VR, kW              the vector type (__m256 / __m512) and its lanes
//   vs_sqrt(v)          the IEEE square root of every lane (correctly rounded)
//   vs_div_scalar(x, b, y)
//                       x / b correctly rounded, b a positive scalar in every
//                       lane and y = 1 / b rounded (Note [Adam's bias
//                       corrections without the divider])
//   vs_load_f16, vs_store_f16, vs_load_bf16, vs_store_bf16
//                       kW 16-bit values widened into / rounded (RNE) from one
//                       vector, bit for bit as core/half.h's conversions
//   vs_leave()          _mm256_zeroupper() (Note [vzeroupper before the tail]
//                       in kernels/cpu/convert_simd.cpp)
//
// One pass over the elements: each vector of kW parameters is loaded, updated
// and stored once (7 streams for f32: read param, grad, m, v; write param, m,
// v; 16-bit weights: read grad16, master, m, v; write master, m, v, param16).
// The arithmetic is optimizer_update's in its order (see adam_vec); a tail
// shorter than a vector runs through a zero-padded vector whose padding lanes
// are never stored.
//
// Note [Adam's bias corrections without the divider]
// The rule divides three times and takes one square root per element:
// m / bc1, v / bc2 and the step's quotient. On Intel's cores the four share
// one divider (VDIVPS / VSQRTPS zmm: about 10-12 cycles a vector each), so
// on a Sapphire/Emerald Rapids-class Xeon the AVX-512 step was divider-bound
// (8.3 ms a step of 9.4M f32 parameters on one core, 6.4-7.1 ms with the two
// scalar divisions made multiplications). bc1 and bc2 are the same for every
// element of a step, so the AVX-512 kernel divides by them with a
// reciprocal and one FMA correction (vs_div_scalar), which gives the
// correctly rounded quotient, the same bits as the division, in the range it
// takes it; elsewhere the vector divides. The step's own quotient keeps the
// divider. Zen 4's divider is faster and the loop there was memory-bound
// either way.
//
// The loop's memory side was measured on Zen 4 (kernels/optimizer/README.md,
// "Optimizer step and GradScaler on the CPU"): the stores are plain
// write-back stores, because every array but the 16-bit weight is read
// before it is written in the same pass (its line is already in the cache,
// so there is no read-for-ownership to save), and non-temporal stores,
// which evict the line and write it around the cache, made the loop 1.5-2x
// slower; streaming only the 16-bit weight changed nothing measurable, and
// software prefetches ahead of the hardware prefetcher made it 4-13% slower.
// What did pay is the page size of the arrays (Note [Huge pages for large
// host blocks] in core/allocator.cpp).
#include <cstdint>
#include <cstring>

#include "kernels/optimizer/optimizer_simd.h"

namespace hg::cpu::HG_OPT_NS {

namespace {

using V = VR;

inline V splat(float c) { return V{} + c; }
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }

// The first rest (< kW) values at p in a vector, the other lanes 0, and back.
template <typename S>
V load_tail(const S* p, int64_t rest, V (*load_full)(const S*)) {
  alignas(64) S buf[kW] = {};
  std::memcpy(buf, p, static_cast<size_t>(rest) * sizeof(S));
  return load_full(buf);
}
template <typename S>
void store_tail(S* p, int64_t rest, V v, void (*store_full)(S*, V)) {
  alignas(64) S buf[kW];
  store_full(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(rest) * sizeof(S));
}

V load_f32(const float* p) { return load(p); }
void store_f32(float* p, V v) { store(p, v); }

// The per-step scalars as vectors, splat once per call.
struct Consts {
  V inv_scale, beta1, beta2, one_minus_beta1, one_minus_beta2, lr, eps, bc1, bc2, weight_decay, decay;
  V inv_bc1, inv_bc2;  // 1 / bc rounded, for vs_div_scalar
  explicit Consts(const AdamConstants& c)
      : inv_scale(splat(c.inv_scale)),
        beta1(splat(c.beta1)),
        beta2(splat(c.beta2)),
        one_minus_beta1(splat(c.one_minus_beta1)),
        one_minus_beta2(splat(c.one_minus_beta2)),
        lr(splat(c.lr)),
        eps(splat(c.eps)),
        bc1(splat(c.bc1)),
        bc2(splat(c.bc2)),
        weight_decay(splat(c.weight_decay)),
        decay(splat(c.decay)),
        inv_bc1(splat(1.0f / c.bc1)),
        inv_bc2(splat(1.0f / c.bc2)) {}
};

// optimizer_update's Adam/AdamW rule on kW lanes, in its order of operations:
//   g = grad * inv_scale                (skipped when inv_scale is 1: x * 1
//                                        is x, and a signalling NaN g is
//                                        quieted by the next multiply alike)
//   AdamW: p = p * (1 - lr wd)          Adam with wd: g = g + wd * p
//   m = beta1 m + (1 - beta1) g         v = beta2 v + ((1 - beta2) g) g
//   p = p - (lr (m / bc1)) / (sqrt(v / bc2) + eps)
// Returns the new p; m and v are updated in place.
template <bool kDecoupled, bool kL2, bool kScaled>
inline V adam_vec(V p, V grad, V& m, V& v, const Consts& c) {
  V g = grad;
  if constexpr (kScaled) g = g * c.inv_scale;
  if constexpr (kDecoupled) {
    p = p * c.decay;
  } else if constexpr (kL2) {
    g = g + c.weight_decay * p;
  }
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  return p - c.lr * vs_div_scalar(m, c.bc1, c.inv_bc1) / (vs_sqrt(vs_div_scalar(v, c.bc2, c.inv_bc2)) + c.eps);
}

template <bool kDecoupled, bool kL2, bool kScaled>
void adam_f32_impl(float* param, const float* grad, float* m, float* v, int64_t n, const AdamConstants& ac) {
  const Consts c(ac);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    V mi = load(m + i), vi = load(v + i);
    const V p = adam_vec<kDecoupled, kL2, kScaled>(load(param + i), load(grad + i), mi, vi, c);
    store(m + i, mi);
    store(v + i, vi);
    store(param + i, p);
  }
  if (i < n) {
    const int64_t r = n - i;
    V mi = load_tail(m + i, r, load_f32), vi = load_tail(v + i, r, load_f32);
    const V p = adam_vec<kDecoupled, kL2, kScaled>(load_tail(param + i, r, load_f32), load_tail(grad + i, r, load_f32),
                                                   mi, vi, c);
    store_tail(m + i, r, mi, store_f32);
    store_tail(v + i, r, vi, store_f32);
    store_tail(param + i, r, p, store_f32);
  }
  vs_leave();
}

template <bool kDecoupled, bool kL2, bool kScaled, bool kF16>
void adam_master_impl(uint16_t* param, const uint16_t* grad, float* master, float* m, float* v, int64_t n,
                      const AdamConstants& ac) {
  const Consts c(ac);
  V (*const load16)(const uint16_t*) = kF16 ? vs_load_f16 : vs_load_bf16;
  void (*const store16)(uint16_t*, V) = kF16 ? vs_store_f16 : vs_store_bf16;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    V mi = load(m + i), vi = load(v + i);
    const V p = adam_vec<kDecoupled, kL2, kScaled>(load(master + i), load16(grad + i), mi, vi, c);
    store(m + i, mi);
    store(v + i, vi);
    store(master + i, p);
    store16(param + i, p);  // the one rounding of the weight
  }
  if (i < n) {
    const int64_t r = n - i;
    V mi = load_tail(m + i, r, load_f32), vi = load_tail(v + i, r, load_f32);
    const V p = adam_vec<kDecoupled, kL2, kScaled>(load_tail(master + i, r, load_f32), load_tail(grad + i, r, load16),
                                                   mi, vi, c);
    store_tail(m + i, r, mi, store_f32);
    store_tail(v + i, r, vi, store_f32);
    store_tail(master + i, r, p, store_f32);
    store_tail(param + i, r, p, store16);
  }
  vs_leave();
}

// The rule's variant as template arguments: AdamW, Adam with L2 decay or
// plain Adam, and whether the gradient is scaled (inv_scale != 1).
template <bool kScaled>
void adam_f32_rule(float* param, const float* grad, float* m, float* v, int64_t n, const AdamConstants& c) {
  if (c.decoupled) {
    adam_f32_impl<true, false, kScaled>(param, grad, m, v, n, c);
  } else if (c.l2) {
    adam_f32_impl<false, true, kScaled>(param, grad, m, v, n, c);
  } else {
    adam_f32_impl<false, false, kScaled>(param, grad, m, v, n, c);
  }
}

void adam_f32(float* param, const float* grad, float* m, float* v, int64_t n, const AdamConstants& c) {
  if (c.inv_scale == 1.0f) {
    adam_f32_rule<false>(param, grad, m, v, n, c);
  } else {
    adam_f32_rule<true>(param, grad, m, v, n, c);
  }
}

template <bool kScaled, bool kF16>
void adam_master_rule(uint16_t* param, const uint16_t* grad, float* master, float* m, float* v, int64_t n,
                      const AdamConstants& c) {
  if (c.decoupled) {
    adam_master_impl<true, false, kScaled, kF16>(param, grad, master, m, v, n, c);
  } else if (c.l2) {
    adam_master_impl<false, true, kScaled, kF16>(param, grad, master, m, v, n, c);
  } else {
    adam_master_impl<false, false, kScaled, kF16>(param, grad, master, m, v, n, c);
  }
}

template <bool kF16>
void adam_master_typed(uint16_t* param, const uint16_t* grad, float* master, float* m, float* v, int64_t n,
                       const AdamConstants& c) {
  if (c.inv_scale == 1.0f) {
    adam_master_rule<false, kF16>(param, grad, master, m, v, n, c);
  } else {
    adam_master_rule<true, kF16>(param, grad, master, m, v, n, c);
  }
}

void adam_master(VecType t, uint16_t* param, const uint16_t* grad, float* master, float* m, float* v, int64_t n,
                 const AdamConstants& c) {
  if (t == VecType::f16) {
    adam_master_typed<true>(param, grad, master, m, v, n, c);
  } else {
    adam_master_typed<false>(param, grad, master, m, v, n, c);
  }
}

}  // namespace

const OptimizerSimdTable& table() {
  static const OptimizerSimdTable t{HG_OPT_NAME, adam_f32, adam_master};
  return t;
}

}  // namespace hg::cpu::HG_OPT_NS
