// The array kernels of kernels/cpu/vec_math.h, written once over a GCC vector
// type and compiled once per ISA. Included only by vec_math_sse2.cpp,
// vec_math_avx2.cpp and vec_math_avx512.cpp, each of which first defines
//   HG_VM_NS            the namespace of its table (hg::cpu::HG_VM_NS::table())
//   HG_VM_NAME          the table's name ("sleef-avx2", ...)
//   VR, kW              the vector type (__m128 / __m256 / __m512) and its lanes
//   vm_exp, vm_log, vm_log1p, vm_tanh, vm_erf   SLEEF's u10 functions of that width
//   vm_erfc             SLEEF's u15 erfc of that width
//   vm_any_lt(a, b)     whether a < b in some lane
//   vm_fma(a, b, c)     a * b + c, fused where the ISA has FMA
//   vm_abs, vm_copysign |a| and |a| with b's sign
//   vm_load_f16, vm_store_f16, vm_load_bf16, vm_store_bf16
//                       kW 16-bit values widened into / rounded (RNE) from one
//                       vector, bit for bit as core/half.h's conversions
//   vm_leave()          what to run before returning to baseline code
//                       (_mm256_zeroupper(), Note [vzeroupper before the tail])
//
// The formulas are the functors' of kernels/elementwise/elementwise_functors.h, in the
// same association order; only the transcendental function differs (SLEEF's
// 1.0-ulp result against glibc's), so results agree with the scalar path to
// a few float ulps, not bit for bit. Every kernel is a template over the
// storage type S (float, half, bfloat16): a 16-bit array is read kW values at
// a time into one vector (widened in the registers), computed in f32 and
// rounded once on store, in the registers; no f32 copy of a 16-bit array is
// made. A 16-bit result is therefore exactly the f32 kernel's result on the
// widened input, rounded once. A tail shorter than a vector is copied into a
// padded vector and back; the padding lanes are never stored, and padded so
// that they add nothing to a sum. NaN in, NaN out, as in the functors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise/elementwise_functors.h"

namespace hg::cpu::HG_VM_NS {

namespace {

using V = VR;
using M = decltype(V{} < V{});  // a lane mask (all ones where true)

inline V splat(float c) { return V{} + c; }
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline V load(const half* p) { return vm_load_f16(reinterpret_cast<const uint16_t*>(p)); }
inline V load(const bfloat16* p) { return vm_load_bf16(reinterpret_cast<const uint16_t*>(p)); }
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
inline void store(half* p, V v) { vm_store_f16(reinterpret_cast<uint16_t*>(p), v); }
inline void store(bfloat16* p, V v) { vm_store_bf16(reinterpret_cast<uint16_t*>(p), v); }
inline float hsum(V v) {
  float s = 0;
  for (int k = 0; k < kW; ++k) s += v[k];
  return s;
}

// The first rest (< kW) values at p in a vector, the other lanes `pad`.
template <typename S>
V load_tail(const S* p, int64_t rest, float pad) {
  S buf[kW];
  for (int k = 0; k < kW; ++k) buf[k] = k < rest ? p[k] : static_cast<S>(pad);
  return load(buf);
}
// The first rest (< kW) lanes of v to p, rounded as store() rounds.
template <typename S>
void store_tail(S* p, int64_t rest, V v) {
  S buf[kW];
  store(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(rest) * sizeof(S));
}

// Runs vm_leave() when the entry point returns (after any tail call).
struct Leave {
  Leave() = default;
  Leave(const Leave&) = delete;
  Leave& operator=(const Leave&) = delete;
  ~Leave() { vm_leave(); }
};

// y[i] = f(x[i]) over n values, vector by vector, the tail through a padded vector.
template <typename S, typename F>
void map1(const S* x, S* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(y + i, f(load(x + i)));
  if (i < n) store_tail(y + i, n - i, f(load_tail(x + i, n - i, 0.0f)));
}
// out[i] = f(a[i], b[i]).
template <typename S, typename F>
void map2(const S* a, const S* b, S* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(out + i, f(load(a + i), load(b + i)));
  if (i < n) store_tail(out + i, n - i, f(load_tail(a + i, n - i, 0.0f), load_tail(b + i, n - i, 0.0f)));
}

// Calls body(typed pointer...) for the storage type t.
template <typename Body>
void with_type(VecType t, const Body& body) {
  switch (t) {
    case VecType::f32:
      body(float{});
      break;
    case VecType::f16:
      body(half::from_bits(0));
      break;
    case VecType::bf16:
      body(bfloat16::from_bits(0));
      break;
  }
}

// 1 / (1 + e^-x) as the functor's sigmoid_of: e^x / (1 + e^x) for x < 0,
// so exp never overflows; one exp of -|x| serves both branches.
inline V sigmoid(V x) {
  const auto nonneg = x >= splat(0.0f);
  const V e = vm_exp(nonneg ? -x : x);
  return (nonneg ? splat(1.0f) : e) / (splat(1.0f) + e);
}
// Note [GELU's erf]
// erf for GELU's normal CDF, cheaper than SLEEF's u10 erf (which took 80 % of
// a GELU call: it evaluates in double-float arithmetic). Two minimax fits in
// float, both evaluated and one chosen per lane:
//   |a| <= 0.927734375:  erf(a) = a + a * P(a^2)            (degree-5 P)
//   |a| >  0.927734375:  erf(a) = sign(a) * (1 - exp(Q(|a|)))  (degree-7 Q)
// The coefficients are N. Juffa's published erff fit. Measured against
// Python's math.erf (f64) on 2.4 million f32 inputs over [-6, 6] and
// 1e-30..6.3 in both signs: max 0.97 ulp with FMA (AVX2, AVX-512), 1.07 ulp
// without (SSE2: separate multiply and add); the test "every CPU math path
// matches f64 on the transcendental ops" holds GELU to the f32 tolerance.
inline V erf_gelu(V a) {
  const V t = vm_abs(a), s = a * a;
  V r = vm_fma(splat(-1.72853470e-5f), t, splat(3.83197126e-4f));
  const V u = vm_fma(splat(-3.88396438e-3f), t, splat(2.42546219e-2f));
  r = vm_fma(r, s, u);
  r = vm_fma(r, t, splat(-1.06777877e-1f));
  r = vm_fma(r, t, splat(-6.34846687e-1f));
  r = vm_fma(r, t, splat(-1.28717512e-1f));
  r = vm_fma(r, t, -t);
  const V big = vm_copysign(splat(1.0f) - vm_exp(r), a);
  V q = vm_fma(splat(-5.96761703e-4f), s, splat(4.99119423e-3f));
  q = vm_fma(q, s, splat(-2.67681349e-2f));
  q = vm_fma(q, s, splat(1.12819925e-1f));
  q = vm_fma(q, s, splat(-3.76125336e-1f));
  q = vm_fma(q, s, splat(1.28379166e-1f));
  const V small = vm_fma(q, a, a);
  return t > splat(0.927734375f) ? big : small;
}
// Note [The normal CDF in the tail]
// Phi(x) = (1 + erf(x / sqrt 2)) / 2 cancels for negative x: erf is near -1
// and 1 + erf keeps only erf's absolute error (about 1e-7 in float), so the
// relative error of Phi grows as 1e-7 / Phi: 4e-5 at x = -3, 100 % by x = -5.5
// where the float sum is 0 while Phi(-5.5) = 2e-8. GELU's bf16 results
// there were hundreds of ulps off (PyTorch's too: it uses the same form).
// erfc(-x / sqrt 2) / 2 has no cancellation, but SLEEF's erfc costs about
// 3 ns a value on this project's Zen 4 (1.5 ulp; its exp 0.35 ns), which
// taken for every negative value would make GELU several times slower. So
// both paths (this one and the functor, ew::normal_cdf) switch at
// ew::kCdfTail = -3: above it the erf form's relative error is at most
// 4e-5, 1 % of a bf16 and 15 % of an f16 half-ulp (a 16-bit result is
// correctly rounded except rarely next to a tie); below it erfc. A vector
// calls erfc only when one of its lanes is below -3 (0.13 % of N(0, 1)
// values, about one vector in 50 of 16 lanes), and in a second pass
// (map1_rare below): with the call inside the main loop, GCC kept the erf
// fit's constants in memory across it (every vector register is
// caller-saved) and GELU ran 25 % slower even where no lane needed erfc.
// f32 results between -3 and -1.31 keep the erf form's error (up to about
// 300 float ulps near -3, as PyTorch's float GELU).
inline V normal_cdf_head(V x) {  // the erf form, right from kCdfTail up
  return splat(0.5f) * (splat(1.0f) + erf_gelu(x * splat(static_cast<float>(ew::kSqrt1_2))));
}
inline bool in_cdf_tail(V x) { return vm_any_lt(x, splat(static_cast<float>(ew::kCdfTail))); }
inline V normal_cdf(V x) {  // both forms, lane by lane
  const V tail_at = splat(static_cast<float>(ew::kCdfTail));
  return x < tail_at ? splat(0.5f) * vm_erfc(-x * splat(static_cast<float>(ew::kSqrt1_2))) : normal_cdf_head(x);
}

// map1 / map2 for a function with a rare slow form: the vectors for which
// rare(key) holds (key: the input, or map2's second input) get slow(...),
// the others fast(...). The first loop computes and stores fast(...) for
// every vector, keeping each vector's inputs in a chunk buffer on the stack
// and marking the rare ones; a second loop recomputes and stores those from
// the buffer (so an output that is also an input does not matter). The
// first loop has neither a call nor a branch in it.
template <typename S, typename Rare, typename Fast, typename Slow>
void map1_rare(const S* x, S* y, int64_t n, Rare rare, Fast fast, Slow slow) {
  constexpr int64_t kChunk = 64;  // vectors
  V in[kChunk];
  bool marked[kChunk];
  for (int64_t c = 0; c < n; c += kChunk * kW) {
    const int64_t vectors = std::min(kChunk, (n - c) / kW);
    for (int64_t k = 0; k < vectors; ++k) {
      in[k] = load(x + c + k * kW);
      marked[k] = rare(in[k]);
      store(y + c + k * kW, fast(in[k]));
    }
    for (int64_t k = 0; k < vectors; ++k) {
      if (marked[k]) store(y + c + k * kW, slow(in[k]));
    }
    const int64_t done = vectors * kW, m = std::min(kChunk * kW, n - c);
    if (done < m) store_tail(y + c + done, m - done, slow(load_tail(x + c + done, m - done, 0.0f)));
  }
}
template <typename S, typename Rare, typename Fast, typename Slow>
void map2_rare(const S* a, const S* b, S* out, int64_t n, Rare rare, Fast fast, Slow slow) {
  constexpr int64_t kChunk = 64;  // vectors
  V in_a[kChunk], in_b[kChunk];
  bool marked[kChunk];
  for (int64_t c = 0; c < n; c += kChunk * kW) {
    const int64_t vectors = std::min(kChunk, (n - c) / kW);
    for (int64_t k = 0; k < vectors; ++k) {
      in_a[k] = load(a + c + k * kW);
      in_b[k] = load(b + c + k * kW);
      marked[k] = rare(in_b[k]);
      store(out + c + k * kW, fast(in_a[k], in_b[k]));
    }
    for (int64_t k = 0; k < vectors; ++k) {
      if (marked[k]) store(out + c + k * kW, slow(in_a[k], in_b[k]));
    }
    const int64_t done = vectors * kW, m = std::min(kChunk * kW, n - c);
    if (done < m) {
      store_tail(out + c + done, m - done,
                 slow(load_tail(a + c + done, m - done, 0.0f), load_tail(b + c + done, m - done, 0.0f)));
    }
  }
}

inline V gelu_tanh_inner(V x) {
  return splat(static_cast<float>(ew::kSqrt2OverPi)) * (x + splat(static_cast<float>(ew::kGeluTanhCoeff)) * x * x * x);
}

template <typename S>
void unary_of(OpId op, const S* x, S* y, int64_t n, float a, float b) {
  switch (op) {
    case OpId::exp:
      map1(x, y, n, [](V v) { return vm_exp(v); });
      break;
    case OpId::log:
      map1(x, y, n, [](V v) { return vm_log(v); });
      break;
    case OpId::tanh:
      map1(x, y, n, [](V v) { return vm_tanh(v); });
      break;
    case OpId::erf:
      map1(x, y, n, [](V v) { return vm_erf(v); });
      break;
    case OpId::sigmoid:
      map1(x, y, n, [](V v) { return sigmoid(v); });
      break;
    case OpId::silu:
      map1(x, y, n, [](V v) { return v * sigmoid(v); });
      break;
    case OpId::gelu:
      map1_rare(
          x, y, n, in_cdf_tail, [](V v) { return v * normal_cdf_head(v); }, [](V v) { return v * normal_cdf(v); });
      break;
    case OpId::gelu_tanh:
      map1(x, y, n, [](V v) { return v * sigmoid(splat(2.0f) * gelu_tanh_inner(v)); });
      break;
    case OpId::softplus: {
      const V beta = splat(a), threshold = splat(b);
      map1(x, y, n, [&](V v) {
        const V bx = beta * v;
        return bx > threshold ? v : vm_log1p(vm_exp(bx)) / beta;
      });
      break;
    }
    default:
      break;  // vec_unary_has(op) is false: the caller never comes here
  }
}

void unary(OpId op, VecType t, const void* x, void* y, int64_t n, float a, float b) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    unary_of<S>(op, static_cast<const S*>(x), static_cast<S*>(y), n, a, b);
  });
}

template <typename S>
void unary_backward_of(OpId op, const S* d, const S* s, S* out, int64_t n, float a, float b) {
  switch (op) {
    case OpId::silu:
      map2(d, s, out, n, [](V dv, V x) {
        const V sg = sigmoid(x);
        return dv * sg * (splat(1.0f) + x * (splat(1.0f) - sg));
      });
      break;
    case OpId::gelu:
      map2_rare(
          d, s, out, n, in_cdf_tail,
          [](V dv, V x) {
            const V pdf = splat(static_cast<float>(ew::kInvSqrt2Pi)) * vm_exp(splat(-0.5f) * x * x);
            return dv * (normal_cdf_head(x) + x * pdf);
          },
          [](V dv, V x) {
            const V pdf = splat(static_cast<float>(ew::kInvSqrt2Pi)) * vm_exp(splat(-0.5f) * x * x);
            return dv * (normal_cdf(x) + x * pdf);
          });
      break;
    case OpId::gelu_tanh:
      map2(d, s, out, n, [](V dv, V x) {
        const V sg = sigmoid(splat(2.0f) * gelu_tanh_inner(x));
        const V d_inner = splat(static_cast<float>(ew::kSqrt2OverPi)) *
                          (splat(1.0f) + splat(static_cast<float>(3 * ew::kGeluTanhCoeff)) * x * x);
        return dv * (sg + splat(2.0f) * x * sg * (splat(1.0f) - sg) * d_inner);
      });
      break;
    case OpId::erf:
      map2(d, s, out, n, [](V dv, V x) { return dv * splat(static_cast<float>(ew::k2OverSqrtPi)) * vm_exp(-x * x); });
      break;
    case OpId::softplus: {
      const V beta = splat(a), threshold = splat(b);
      map2(d, s, out, n, [&](V dv, V x) {
        const V bx = beta * x;
        return bx > threshold ? dv : dv * sigmoid(bx);
      });
      break;
    }
    default:
      break;
  }
}

void unary_backward(OpId op, VecType t, const void* d, const void* s, void* out, int64_t n, float a, float b) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    unary_backward_of<S>(op, static_cast<const S*>(d), static_cast<const S*>(s), static_cast<S*>(out), n, a, b);
  });
}

// max over the row; NaN when any value is NaN (max_nan's rule).
template <typename S>
float row_max(const S* x, int64_t n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  V mv = splat(neg_inf);
  M nan = M{};
  int64_t i = 0;
  const auto step = [&](V v) {
    nan |= v != v;
    mv = v > mv ? v : mv;
  };
  for (; i + kW <= n; i += kW) step(load(x + i));
  if (i < n) step(load_tail(x + i, n - i, neg_inf));
  float m = neg_inf;
  bool any_nan = false;
  for (int k = 0; k < kW; ++k) {
    m = mv[k] > m ? mv[k] : m;
    any_nan = any_nan || nan[k] != 0;
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// Cross-entropy's row statistics (vec_math.h): the max, then one pass for
// sum exp(x - m) and, with want_gap, sum (m - x). The tail's padding lanes
// are -inf for the exp (exp(-inf - m) adds 0) and m for the gap (adds 0).
template <typename S, bool kGap>
void lse_row_of(const S* x, int64_t n, float* m_out, float* s_out, float* gap_out) {
  const float m = row_max(x, n);
  const V mv = splat(m);
  V acc = V{}, gap = V{};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V v = load(x + i);
    acc += vm_exp(v - mv);
    if constexpr (kGap) gap += mv - v;
  }
  if (i < n) {
    acc += vm_exp(load_tail(x + i, n - i, -std::numeric_limits<float>::infinity()) - mv);
    if constexpr (kGap) gap += mv - load_tail(x + i, n - i, m);
  }
  *m_out = m;
  *s_out = hsum(acc);
  if constexpr (kGap) *gap_out = hsum(gap);
}

void lse_row(VecType t, const void* x, int64_t n, float* m, float* s, float* gap) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    if (gap != nullptr) {
      lse_row_of<S, true>(static_cast<const S*>(x), n, m, s, gap);
    } else {
      lse_row_of<S, false>(static_cast<const S*>(x), n, m, s, nullptr);
    }
  });
}

void exp_grad(VecType t, const void* x, void* out, int64_t n, float m, float log_s, float off, float scale) {
  const Leave leave;
  const V mv = splat(m), lv = splat(log_s), ov = splat(off), sv = splat(scale);
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    map1(static_cast<const S*>(x), static_cast<S*>(out), n, [&](V v) { return (vm_exp((v - mv) - lv) - ov) * sv; });
  });
}

// softmax / log_softmax of one row (vec_math.h). The tail's padding lanes
// are -inf, whose exp(-inf - m) adds 0 to the sum.
template <typename S>
void softmax_row_of(bool log, const S* x, S* y, int64_t n, float* scratch) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const float m = row_max(x, n);
  const V sh = splat(m);
  float* e = nullptr;  // where the exp values are kept for the division
  if (!log) {
    if constexpr (std::is_same_v<S, float>) {
      e = y;
    } else {
      e = scratch;
    }
  }
  V acc = V{};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V ev = vm_exp(load(x + i) - sh);
    if (e != nullptr) store(e + i, ev);
    acc += ev;
  }
  if (i < n) {
    const V ev = vm_exp(load_tail(x + i, n - i, neg_inf) - sh);
    if (e != nullptr) store_tail(e + i, n - i, ev);
    acc += ev;
  }
  const float s = hsum(acc);
  if (log) {
    const V ls = splat(std::log(s));
    map1(x, y, n, [&](V v) { return (v - sh) - ls; });
  } else {
    const V sv = splat(s);
    int64_t j = 0;
    for (; j + kW <= n; j += kW) store(y + j, load(e + j) / sv);
    if (j < n) store_tail(y + j, n - j, load_tail(e + j, n - j, 0.0f) / sv);
  }
}

void softmax_row(VecType t, bool log, const void* x, void* y, int64_t n, float* scratch) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    softmax_row_of<S>(log, static_cast<const S*>(x), static_cast<S*>(y), n, scratch);
  });
}

template <typename S>
void softmax_backward_row_of(bool log, const S* d_y, const S* y, S* d_x, int64_t n) {
  V acc = V{};
  int64_t i = 0;
  const auto term = [&](V dv, V yv) { return log ? dv : dv * yv; };
  for (; i + kW <= n; i += kW) acc += term(load(d_y + i), load(y + i));
  if (i < n) acc += term(load_tail(d_y + i, n - i, 0.0f), load_tail(y + i, n - i, 0.0f));
  const V dot = splat(hsum(acc));
  if (log) {
    map2(d_y, y, d_x, n, [&](V dv, V yv) { return dv - vm_exp(yv) * dot; });
  } else {
    map2(d_y, y, d_x, n, [&](V dv, V yv) { return yv * (dv - dot); });
  }
}

void softmax_backward_row(VecType t, bool log, const void* d_y, const void* y, void* d_x, int64_t n) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    softmax_backward_row_of<S>(log, static_cast<const S*>(d_y), static_cast<const S*>(y), static_cast<S*>(d_x), n);
  });
}

// The conversions alone: the same load / store as every kernel above.
void widen(VecType t, const void* x, float* y, int64_t n) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    const S* xs = static_cast<const S*>(x);
    int64_t i = 0;
    for (; i + kW <= n; i += kW) store(y + i, load(xs + i));
    if (i < n) store_tail(y + i, n - i, load_tail(xs + i, n - i, 0.0f));
  });
}
void narrow(VecType t, const float* x, void* y, int64_t n) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    S* ys = static_cast<S*>(y);
    int64_t i = 0;
    for (; i + kW <= n; i += kW) store(ys + i, load(x + i));
    if (i < n) store_tail(ys + i, n - i, load_tail(x + i, n - i, 0.0f));
  });
}

// ---- batch norm's runs ----------------------------------------------------------------------

// Half a vector's floats, and as many doubles (the same bytes as a V).
using VH = float __attribute__((vector_size(kW * 2)));
using VD = double __attribute__((vector_size(kW * 4)));

// v's lanes widened exactly to double: the first half in lo, the second in hi.
inline void widen_f64(V v, VD& lo, VD& hi) {
  VH a, b;
  std::memcpy(&a, &v, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
  lo = __builtin_convertvector(a, VD);
  hi = __builtin_convertvector(b, VD);
}
inline double hsum_f64(VD v) {
  double s = 0;
  for (int k = 0; k < kW / 2; ++k) s += v[k];
  return s;
}

// sum x or sum (x - shift)^2 over n values: whole vectors into two double
// accumulators, the tail (< kW values) added one at a time.
template <bool Square, typename S>
double sum_f64_of(const S* x, int64_t n, double shift) {
  const VD sh = VD{} + shift;
  VD a0 = VD{}, a1 = VD{};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    VD lo, hi;
    widen_f64(load(x + i), lo, hi);
    if constexpr (Square) {
      lo -= sh;
      hi -= sh;
      a0 += lo * lo;
      a1 += hi * hi;
    } else {
      a0 += lo;
      a1 += hi;
    }
  }
  double s = hsum_f64(a0 + a1);
  for (; i < n; ++i) {
    const double v = static_cast<double>(static_cast<float>(x[i]));
    if constexpr (Square) {
      s += (v - shift) * (v - shift);
    } else {
      s += v;
    }
  }
  return s;
}

double sum_f64(VecType t, const void* x, int64_t n, double shift, bool square) {
  const Leave leave;
  double s = 0;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    const S* xs = static_cast<const S*>(x);
    s = square ? sum_f64_of<true>(xs, n, shift) : sum_f64_of<false>(xs, n, shift);
  });
  return s;
}

template <typename S>
void dot_f64_of(const S* g, const S* x, int64_t n, double shift, double* sum_g, double* sum_gx) {
  const VD sh = VD{} + shift;
  VD g0 = VD{}, g1 = VD{}, p0 = VD{}, p1 = VD{};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    VD glo, ghi, xlo, xhi;
    widen_f64(load(g + i), glo, ghi);
    widen_f64(load(x + i), xlo, xhi);
    g0 += glo;
    g1 += ghi;
    p0 += glo * (xlo - sh);
    p1 += ghi * (xhi - sh);
  }
  double sg = hsum_f64(g0 + g1), sp = hsum_f64(p0 + p1);
  for (; i < n; ++i) {
    const double gv = static_cast<double>(static_cast<float>(g[i]));
    sg += gv;
    sp += gv * (static_cast<double>(static_cast<float>(x[i])) - shift);
  }
  *sum_g = sg;
  *sum_gx = sp;
}

void dot_f64(VecType t, const void* g, const void* x, int64_t n, double shift, double* sum_g, double* sum_gx) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    dot_f64_of(static_cast<const S*>(g), static_cast<const S*>(x), n, shift, sum_g, sum_gx);
  });
}

void affine(VecType t, const void* x, void* y, int64_t n, float sub, float mul, float add) {
  const Leave leave;
  const V sv = splat(sub), mv = splat(mul), av = splat(add);
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    map1(static_cast<const S*>(x), static_cast<S*>(y), n, [&](V v) { return (v - sv) * mv + av; });
  });
}

void bn_dx(VecType t, const void* g, const void* x, void* dx, int64_t n, float mean, float rstd, float k, float m,
           float a, float b) {
  const Leave leave;
  const V mv = splat(mean), rv = splat(rstd), kv = splat(k), fm = splat(m), av = splat(a), bv = splat(b);
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    map2(static_cast<const S*>(g), static_cast<const S*>(x), static_cast<S*>(dx), n, [&](V gv, V xv) {
      const V xhat = (xv - mv) * rv;
      return kv * (fm * gv - av - xhat * bv);
    });
  });
}

}  // namespace

const VecMathTable& table() {
  static const VecMathTable t{HG_VM_NAME, unary,  unary_backward, lse_row, exp_grad, softmax_row, softmax_backward_row,
                              widen,      narrow, sum_f64,        dot_f64, affine,   bn_dx};
  return t;
}

}  // namespace hg::cpu::HG_VM_NS
