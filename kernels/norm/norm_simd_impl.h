// The norm row kernels of kernels/norm/norm_simd.h, written once over the GCC
// vector type of kernels/cpu/vec_math_impl.h and compiled once per ISA:
// included by vec_math_sse2.cpp, vec_math_avx2.cpp and vec_math_avx512.cpp
// after vec_math_impl.h, whose helpers (V, kW, splat, load, store, load_tail,
// store_tail, hsum, Leave, with_type) it uses.
//
// Note [vector norm rows]
// Each pass over a row reads it once, kW values a vector (16-bit values
// widened in the registers), and a 16-bit output is rounded once in the
// registers on store, so a 16-bit row gives exactly the f32 kernel's result
// on the widened values, rounded once. The forward is three passes: the sum
// (mean), the centred sum of squares (two passes: no cancellation) and the
// normalisation; the row is L1/L2-resident after the first. The backward is
// two: the sums of g and g * xhat, then d_x, adding d_y * xhat and d_y into
// the caller's f32 partial rows of d_w and d_b on the way (so d_y and x are
// read from memory once for all three gradients).
//
// Sum order: leaves of kNormBlock values summed in four interleaved vector
// accumulators (vector i of a leaf into accumulator i % 4, each lane left to
// right), combined (0 + 1) + (2 + 3); leaves combined pairwise by halving, as
// kernels/norm/norm_cpu.cpp's scalar pairwise_sum; the lanes of the result added
// left to right. The order depends only on the row length and the ISA's
// vector width (and on vm_fma: fused where the ISA has FMA), so the
// results are the same from run to run and between the f32 and 16-bit
// kernels, and differ between ISAs by a few roundings of the sums.
// A row's tail shorter than a vector is loaded into a zero-padded vector; the
// lanes past it are zeroed before any sum and never stored.
#include <xmmintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/norm/norm_simd.h"

namespace hg::cpu::HG_VM_NS {

namespace {

constexpr int64_t kNormBlock = 256;  // a multiple of 4 * kW on every ISA
static_assert(kNormBlock % (4 * kW) == 0);

// Two sums carried together (the backward's sum of g and of g * xhat).
struct V2 {
  V a, b;
};
inline V2 operator+(V2 p, V2 q) { return {p.a + q.a, p.b + q.b}; }

// v with the lanes from rest on set to 0.
inline V first_lanes(V v, int64_t rest) {
  V idx{};
  for (int k = 0; k < kW; ++k) idx[k] = static_cast<float>(k);
  return idx < splat(static_cast<float>(rest)) ? v : V{};
}

// A tail's length (1 <= rest < kW), stated for the compiler's bounds checks.
inline int64_t tail_length(int64_t rest) {
  if (rest < 1 || rest >= kW) __builtin_unreachable();
  return rest;
}
// The vector at p + i: kW values, or the rest (< kW) of a row zero-padded.
template <typename S>
inline V load_part(const S* p, int64_t i, int64_t rest) {
  return rest == kW ? load(p + i) : load_tail(p + i, tail_length(rest), 0.0f);
}
template <typename S>
inline void store_part(S* p, int64_t i, int64_t rest, V v) {
  if (rest == kW) {
    store(p + i, v);
  } else {
    store_tail(p + i, tail_length(rest), v);
  }
}

// Note [explicit FMA in the norm rows]
// GCC contracts a * b + c into one FMA where the ISA has it (-ffp-contract=
// fast, its default for C++), and it did so differently in the f32 and bf16
// instantiations of the same row code, so a 16-bit result was not the f32
// kernel's in the last bit. Here every product that feeds a sum is either an
// explicit vm_fma or passed through no_fuse, which hides it from the
// contraction (an empty asm: no instruction), so every instantiation does
// the same arithmetic.
inline V no_fuse(V p) {
  __asm__("" : "+v"(p));
  return p;
}

// The sum over i in [begin, begin + n) of the vectors of values i .. i + rest
// - 1 (rest == kW but at the row's end, where the lanes from rest on must add
// 0), each added into an accumulator by acc = step(acc, i, rest), in the
// order of Note [vector norm rows].
template <typename R, typename Step>
R block_sum(int64_t begin, int64_t n, const Step& step) {
  if (n <= kNormBlock) {
    R a0{}, a1{}, a2{}, a3{};
    int64_t i = 0;
    for (; i + 4 * kW <= n; i += 4 * kW) {
      a0 = step(a0, begin + i, kW);
      a1 = step(a1, begin + i + kW, kW);
      a2 = step(a2, begin + i + 2 * kW, kW);
      a3 = step(a3, begin + i + 3 * kW, kW);
    }
    // The leaf's last vectors (up to 3 whole, then a partial one) continue the interleave.
    int64_t v = 0;
    for (; i + kW <= n; i += kW, ++v) {
      if (v == 0) {
        a0 = step(a0, begin + i, kW);
      } else if (v == 1) {
        a1 = step(a1, begin + i, kW);
      } else {
        a2 = step(a2, begin + i, kW);
      }
    }
    if (i < n) {
      const int64_t rest = n - i;
      if (v == 0) {
        a0 = step(a0, begin + i, rest);
      } else if (v == 1) {
        a1 = step(a1, begin + i, rest);
      } else if (v == 2) {
        a2 = step(a2, begin + i, rest);
      } else {
        a3 = step(a3, begin + i, rest);
      }
    }
    return (a0 + a1) + (a2 + a3);
  }
  const int64_t left = ((n + kNormBlock - 1) / kNormBlock / 2) * kNormBlock;
  return block_sum<R>(begin, left, step) + block_sum<R>(begin + left, n - left, step);
}

template <bool kHasW, bool kHasB, typename S>
void forward_rows_of(bool rms, const S* x, S* y, float* mean_out, float* rstd_out, const float* w, const float* b,
                     int64_t rows, int64_t cols, float eps) {
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const S* xr = x + r * cols;
    S* yr = y + r * cols;
    float mean = 0.0f;
    if (!rms) {
      mean =
          hsum(block_sum<V>(0, cols, [&](V acc, int64_t i, int64_t rest) { return acc + load_part(xr, i, rest); })) / n;
    }
    const V mv = splat(mean);
    const float sq = hsum(block_sum<V>(0, cols, [&](V acc, int64_t i, int64_t rest) {
      V d = load_part(xr, i, rest) - mv;
      if (rest != kW) d = first_lanes(d, rest);
      return vm_fma(d, d, acc);
    }));
    const float rstd = 1.0f / std::sqrt(sq / n + eps);
    if (!rms) mean_out[r] = mean;
    rstd_out[r] = rstd;
    const V rv = splat(rstd);
    const auto normalise = [&](int64_t i, int64_t rest) {
      const V xh = (load_part(xr, i, rest) - mv) * rv;
      V v = xh;
      if constexpr (kHasW && kHasB) {
        v = vm_fma(xh, load_part(w, i, rest), load_part(b, i, rest));
      } else if constexpr (kHasW) {
        v = xh * load_part(w, i, rest);
      } else if constexpr (kHasB) {
        v = no_fuse(xh) + load_part(b, i, rest);
      }
      store_part(yr, i, rest, v);
    };
    int64_t i = 0;
    for (; i + kW <= cols; i += kW) normalise(i, kW);
    if (i < cols) normalise(i, cols - i);
  }
}

void forward_rows(VecType t, bool rms, const void* x, void* y, float* mean, float* rstd, const float* w, const float* b,
                  int64_t rows, int64_t cols, float eps) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    const S* xs = static_cast<const S*>(x);
    S* ys = static_cast<S*>(y);
    if (w != nullptr && b != nullptr) {
      forward_rows_of<true, true>(rms, xs, ys, mean, rstd, w, b, rows, cols, eps);
    } else if (w != nullptr) {
      forward_rows_of<true, false>(rms, xs, ys, mean, rstd, w, b, rows, cols, eps);
    } else if (b != nullptr) {
      forward_rows_of<false, true>(rms, xs, ys, mean, rstd, w, b, rows, cols, eps);
    } else {
      forward_rows_of<false, false>(rms, xs, ys, mean, rstd, w, b, rows, cols, eps);
    }
  });
}

// Note [prefetching the next row in the norm backward]
// The backward reads each row of d_y and x twice: the sums (the first touch,
// from memory) and then d_x (from L1). The sums of a row cannot start until
// the row before has its d_x, so each row waited out the memory latency at
// its first loads, and the hardware prefetcher did not hide it: single-
// threaded on the project's Zen 4 VM (thread CPU time, under load) the f16
// backward of 21845 x 768 took 13-14 ms against 5.5-6 ms for an f16 add over
// the same bytes, and 5.5 ms with the sums left out. So the d_x pass of a row
// prefetches the next row of the block into L1, one line of d_y and of x per
// vector step at the same offset (for 16-bit rows every other one repeats a
// line): the misses then overlap the current row's work, and the sums find
// the row in L1. Measured: f16 and bf16 8-9 ms, f32 25 -> 17 ms. Prefetching
// the whole next row when a row starts (a burst of 48-96 prefetches) gave 11
// ms; two rows ahead, or prefetching from the sums' pass, did no better.
// _mm_prefetch: a build of this file with __builtin_prefetch carried no
// prefetch instruction (GCC 12; check with objdump -d | grep prefetcht0).
inline void prefetch_line(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

template <bool kHasW, typename S>
void backward_rows_of(bool rms, const S* d_y, const S* x, const float* mean, const float* rstd, const float* w, S* d_x,
                      float* pw, float* pb, int64_t rows, int64_t cols) {
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const S* dyr = d_y + r * cols;
    const S* xr = x + r * cols;
    const V muv = splat(rms ? 0.0f : mean[r]);
    const float rs = rstd[r];
    const V rsv = splat(rs);
    // g and xhat of the vector at i (lanes from rest on: 0).
    const auto g_of = [&](V dy, int64_t i, int64_t rest) {
      if constexpr (kHasW) {
        return no_fuse(dy * load_part(w, i, rest));
      } else {
        (void)i;
        (void)rest;
        return dy;
      }
    };
    const auto xhat_of = [&](int64_t i, int64_t rest) {
      const V xh = no_fuse((load_part(xr, i, rest) - muv) * rsv);
      return rest == kW ? xh : first_lanes(xh, rest);
    };
    // The partial rows of d_w and d_b: += d_y * xhat, += d_y.
    const auto accumulate = [&](V dy, V xh, int64_t i, int64_t rest) {
      if (pw != nullptr) store_part(pw, i, rest, vm_fma(dy, xh, load_part(pw, i, rest)));
      if (pb != nullptr) store_part(pb, i, rest, load_part(pb, i, rest) + dy);
    };
    if (d_x == nullptr) {
      int64_t i = 0;
      for (; i + kW <= cols; i += kW) accumulate(load(dyr + i), xhat_of(i, kW), i, kW);
      if (i < cols) accumulate(load_part(dyr, i, cols - i), xhat_of(i, cols - i), i, cols - i);
      continue;
    }
    float mean_g = 0.0f, mean_gx = 0.0f;
    if (rms) {
      mean_gx = hsum(block_sum<V>(0, cols,
                                  [&](V acc, int64_t i, int64_t rest) {
                                    return vm_fma(g_of(load_part(dyr, i, rest), i, rest), xhat_of(i, rest), acc);
                                  })) /
                n;
    } else {
      const V2 s = block_sum<V2>(0, cols, [&](V2 acc, int64_t i, int64_t rest) {
        const V g = g_of(load_part(dyr, i, rest), i, rest);
        return V2{acc.a + g, vm_fma(g, xhat_of(i, rest), acc.b)};
      });
      mean_g = hsum(s.a) / n;
      mean_gx = hsum(s.b) / n;
    }
    const V mgv = splat(mean_g), neg_mgxv = splat(-mean_gx);
    S* dxr = d_x + r * cols;
    const bool next = r + 1 < rows;
    const auto step = [&](int64_t i, int64_t rest) {
      if (next) {  // Note [prefetching the next row in the norm backward]
        prefetch_line(dyr + cols + i);
        prefetch_line(xr + cols + i);
      }
      const V dy = load_part(dyr, i, rest);
      const V g = g_of(dy, i, rest);
      const V xh = xhat_of(i, rest);
      // norm_math::d_x's association, the product fused:
      // rstd * ((g - mean_g) - xhat * mean_gx)
      const V dx = rms ? rsv * vm_fma(xh, neg_mgxv, g) : rsv * vm_fma(xh, neg_mgxv, g - mgv);
      store_part(dxr, i, rest, dx);
      accumulate(dy, xh, i, rest);
    };
    int64_t i = 0;
    for (; i + kW <= cols; i += kW) step(i, kW);
    if (i < cols) step(i, cols - i);
  }
}

void backward_rows(VecType t, bool rms, const void* d_y, const void* x, const float* mean, const float* rstd,
                   const float* w, void* d_x, float* d_w_part, float* d_b_part, int64_t rows, int64_t cols) {
  const Leave leave;
  with_type(t, [&](auto tag) {
    using S = decltype(tag);
    const S* dys = static_cast<const S*>(d_y);
    const S* xs = static_cast<const S*>(x);
    S* dxs = static_cast<S*>(d_x);
    if (w != nullptr) {
      backward_rows_of<true>(rms, dys, xs, mean, rstd, w, dxs, d_w_part, d_b_part, rows, cols);
    } else {
      backward_rows_of<false>(rms, dys, xs, mean, rstd, w, dxs, d_w_part, d_b_part, rows, cols);
    }
  });
}

}  // namespace

const VecNormTable& norm_table() {
  static const VecNormTable t{HG_VM_NAME, forward_rows, backward_rows};
  return t;
}

}  // namespace hg::cpu::HG_VM_NS
