// CPU 2-D pooling (max, average, adaptive average) and batch normalisation,
// forward and backward: the references for kernels/conv/pool_norm.cu
// (formulas in kernels/conv/conv.h). Every tensor is read and written through its
// strides, so NCHW and channels-last take the same code without a copy.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/conv/conv.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/conv/view4.h"

namespace hg::cpu {

namespace {

// ---- pooling --------------------------------------------------------------------------------

// One output row of the 2x2 / stride 2 max-pool over dense input rows r0, r1
// (NCHW), four outputs at a time in SSE2 vectors (GCC vector extensions): the
// tree of pick() below on lanes, the even and odd columns split by shuffles,
// the flat indices in 32-bit lanes (the caller checks H*W fits). Returns the
// number of outputs written (a multiple of 4); the caller does the rest.
template <typename T>
int64_t max_pool_2x2_row(const T* r0, const T* r1, T* y, int64_t* idx, int64_t OW, int64_t top, int64_t W) {
  using f4 = float __attribute__((vector_size(16)));
  using i4 = int32_t __attribute__((vector_size(16)));
  const int64_t n4 = OW / 4 * 4;
  const i4 lane = {0, 2, 4, 6};
  for (int64_t j = 0; j < n4; j += 4) {
    float a[8], b[8];
    for (int q = 0; q < 8; ++q) {
      a[q] = static_cast<float>(r0[2 * j + q]);
      b[q] = static_cast<float>(r1[2 * j + q]);
    }
    f4 a_lo, a_hi, b_lo, b_hi;
    std::memcpy(&a_lo, a, 16);
    std::memcpy(&a_hi, a + 4, 16);
    std::memcpy(&b_lo, b, 16);
    std::memcpy(&b_hi, b + 4, 16);
    const f4 a0 = __builtin_shufflevector(a_lo, a_hi, 0, 2, 4, 6), a1 = __builtin_shufflevector(a_lo, a_hi, 1, 3, 5, 7);
    const f4 b0 = __builtin_shufflevector(b_lo, b_hi, 0, 2, 4, 6), b1 = __builtin_shufflevector(b_lo, b_hi, 1, 3, 5, 7);
    // take the later candidate when it is greater or NaN (masks: -1 = take)
    const i4 t0 = (a1 > a0) | (a1 != a1), t1 = (b1 > b0) | (b1 != b1);
    const f4 m0 = t0 ? a1 : a0, m1 = t1 ? b1 : b0;
    const i4 base = static_cast<int32_t>(top + 2 * j) + lane;
    const i4 i0 = base - t0, i1 = base + static_cast<int32_t>(W) - t1;
    const i4 t = (m1 > m0) | (m1 != m1);
    const f4 m = t ? m1 : m0;
    const i4 im = t ? i1 : i0;
    for (int q = 0; q < 4; ++q) {
      y[j + q] = static_cast<T>(m[q]);
      idx[j + q] = im[q];
    }
  }
  return n4;
}

template <typename T>
void max_pool2d_forward_typed(const Tensor& y, const Tensor& idx, const Tensor& x, const Pool2dParams& p) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const View4<int64_t> iv(idx);
  // The common 2x2 / stride 2 window without padding, every window inside,
  // no bounds arithmetic, as a tree: the maximum of each row pair, then of
  // the two rows. "Take the later candidate when it is greater or NaN" gives
  // the sequential scan's answer in any grouping that keeps the order (the
  // first maximum; the last NaN when there is one), and the tree's three
  // selects depend on each other two deep instead of four, written as
  // selects the compiler can turn into vector blends across output columns.
  const auto pick = [](S a, int64_t ia, S b, int64_t ib, S& m, int64_t& im) {
    const bool take = (b > a) | (b != b);
    m = take ? b : a;
    im = take ? ib : ia;
  };
  const bool k2s2 = p.kernel == std::array<int64_t, 2>{2, 2} && p.stride == std::array<int64_t, 2>{2, 2} &&
                    p.padding == std::array<int64_t, 2>{0, 0} && p.dilation == std::array<int64_t, 2>{1, 1} &&
                    2 * OH <= H && 2 * OW <= W;
  if (k2s2) {
    parallel_for(N * C, N * C * OH * OW >= kParallelGrain, [&](int64_t nc) {
      const int64_t n = nc / C, c = nc % C;
      const T* xp = xv.p + n * xv.s0 + c * xv.s1;
      for (int64_t i = 0; i < OH; ++i) {
        const T* r0 = xp + 2 * i * xv.s2;
        const T* r1 = r0 + xv.s2;
        T* yrow = &yv.at(n, c, i, 0);
        int64_t* irow = &iv.at(n, c, i, 0);
        const int64_t s3 = xv.s3;
        int64_t j0 = 0;
        if constexpr (!std::is_same_v<T, double>) {  // f32 and 16-bit: exact in float lanes
          if (s3 == 1 && yv.s3 == 1 && iv.s3 == 1 && H * W <= INT32_MAX) {
            j0 = max_pool_2x2_row(r0, r1, yrow, irow, OW, 2 * i * W, W);
          }
        }
        for (int64_t j = j0; j < OW; ++j) {
          const int64_t w = 2 * j, at = 2 * i * W + w;
          S m0, m1, best;
          int64_t i0, i1, arg;
          pick(static_cast<S>(r0[w * s3]), at, static_cast<S>(r0[(w + 1) * s3]), at + 1, m0, i0);
          pick(static_cast<S>(r1[w * s3]), at + W, static_cast<S>(r1[(w + 1) * s3]), at + W + 1, m1, i1);
          pick(m0, i0, m1, i1, best, arg);
          yrow[j * yv.s3] = static_cast<T>(best);
          irow[j * iv.s3] = arg;
        }
      }
    });
    return;
  }
  parallel_for(N * C, N * C * OH * OW >= kParallelGrain, [&](int64_t nc) {
    const int64_t n = nc / C, c = nc % C;
    const T* xp = xv.p + n * xv.s0 + c * xv.s1;
    for (int64_t i = 0; i < OH; ++i) {
      int64_t h0 = i * p.stride[0] - p.padding[0];
      const int64_t h1 = std::min(h0 + (p.kernel[0] - 1) * p.dilation[0] + 1, H);
      while (h0 < 0) h0 += p.dilation[0];
      for (int64_t j = 0; j < OW; ++j) {
        int64_t w0 = j * p.stride[1] - p.padding[1];
        const int64_t w1 = std::min(w0 + (p.kernel[1] - 1) * p.dilation[1] + 1, W);
        while (w0 < 0) w0 += p.dilation[1];
        S best = -std::numeric_limits<S>::infinity();
        int64_t arg = h0 * W + w0;
        for (int64_t h = h0; h < h1; h += p.dilation[0]) {
          for (int64_t w = w0; w < w1; w += p.dilation[1]) {
            const S v = static_cast<S>(xp[h * xv.s2 + w * xv.s3]);
            if (v > best || v != v) {  // NaN wins
              best = v;
              arg = h * W + w;
            }
          }
        }
        yv.at(n, c, i, j) = static_cast<T>(best);
        iv.at(n, c, i, j) = arg;
      }
    }
  });
}

// The 2x2 / stride 2 window without padding (the forward's k2s2 case) on
// dense rows: the windows do not overlap, so each x receives at most one d_y
// and d_x is written directly, row pair by row pair: d_y at the window's
// argmax, 0 at its other three places and outside every window. The value
// written is S(0) + d_y rounded to T, the plane sum's value bit for bit
// (-0 becomes +0 there too). Returns false (nothing written) when the
// shape or layout is another.
template <typename T>
bool max_pool2d_backward_2x2(const Tensor& d_x, const Tensor& d_y, const Tensor& idx, const Pool2dParams& p) {
  using S = acc_t<T>;
  const int64_t N = d_x.size(0), C = d_x.size(1), H = d_x.size(2), W = d_x.size(3), OH = d_y.size(2), OW = d_y.size(3);
  const bool k2s2 = p.kernel == std::array<int64_t, 2>{2, 2} && p.stride == std::array<int64_t, 2>{2, 2} &&
                    p.padding == std::array<int64_t, 2>{0, 0} && p.dilation == std::array<int64_t, 2>{1, 1} &&
                    2 * OH <= H && 2 * OW <= W;
  const View4<const T> dyv(d_y);
  const View4<const int64_t> iv(idx);
  const View4<T> dxv(d_x);
  if (!k2s2 || dyv.s3 != 1 || iv.s3 != 1 || dxv.s3 != 1) return false;
  const T zero = static_cast<T>(S(0));
  parallel_for(N * C, N * C * H * W >= kParallelGrain, [&](int64_t nc) {
    const int64_t n = nc / C, c = nc % C;
    T* dx = dxv.p + n * dxv.s0 + c * dxv.s1;
    for (int64_t i = 0; i < OH; ++i) {
      T* r0 = dx + 2 * i * dxv.s2;
      T* r1 = r0 + dxv.s2;
      const T* g = dyv.p + n * dyv.s0 + c * dyv.s1 + i * dyv.s2;
      const int64_t* ix = iv.p + n * iv.s0 + c * iv.s1 + i * iv.s2;
      const int64_t top = 2 * i * W;
      for (int64_t j = 0; j < OW; ++j) {
        const int64_t at = ix[j] - top - 2 * j;  // 0, 1, W or W + 1: the place in the window
        const T v = static_cast<T>(S(0) + static_cast<S>(g[j]));
        r0[2 * j] = at == 0 ? v : zero;
        r0[2 * j + 1] = at == 1 ? v : zero;
        r1[2 * j] = at == W ? v : zero;
        r1[2 * j + 1] = at == W + 1 ? v : zero;
      }
      for (int64_t w = 2 * OW; w < W; ++w) r0[w] = r1[w] = zero;  // an odd W's last column
    }
    for (int64_t h = 2 * OH; h < H; ++h) {  // an odd H's last row
      for (int64_t w = 0; w < W; ++w) dx[h * dxv.s2 + w] = zero;
    }
  });
  return true;
}

template <typename T>
void max_pool2d_backward_typed(const Tensor& d_x, const Tensor& d_y, const Tensor& idx, const Pool2dParams& p) {
  using S = acc_t<T>;
  if (max_pool2d_backward_2x2<T>(d_x, d_y, idx, p)) return;
  const int64_t N = d_x.size(0), C = d_x.size(1), W = d_x.size(3), OH = d_y.size(2), OW = d_y.size(3);
  const View4<const T> dyv(d_y);
  const View4<const int64_t> iv(idx);
  const View4<T> dxv(d_x);
  // Overlapping windows may route several d_y to one x: sum per plane in S.
  parallel_for(N * C, N * C * OH * OW >= kParallelGrain, [&](int64_t nc) {
    const int64_t n = nc / C, c = nc % C;
    std::vector<S> plane(static_cast<size_t>(d_x.size(2) * W), S(0));
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j)
        plane[static_cast<size_t>(iv.at(n, c, i, j))] += static_cast<S>(dyv.at(n, c, i, j));
    for (int64_t h = 0; h < d_x.size(2); ++h)
      for (int64_t w = 0; w < W; ++w) dxv.at(n, c, h, w) = static_cast<T>(plane[static_cast<size_t>(h * W + w)]);
  });
}

// The avg_pool2d window of output (i, j) along one dim: [lo, hi) clipped, and its divisor part.
struct Window {
  int64_t lo, hi, padded;
};
inline Window avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad) {
  int64_t lo = o * s - pad;
  int64_t hi = std::min(lo + k, in + pad);
  const int64_t padded = hi - lo;
  lo = std::max<int64_t>(lo, 0);
  hi = std::min(hi, in);
  return {lo, hi, padded};
}

// Average pooling of both kinds, forward (out = y, in = x) and backward
// (out = d_x, in = d_y): window_at(i, j) gives output (i, j)'s window and its
// divisor; the backward spreads g / divisor over the window into an f32
// (acc_t) plane per (n, c), written out once.
struct AvgWindow {
  Window h, w;
  int64_t divisor;
};

template <typename T, bool Backward, typename WindowAt>
void avg_pool_planes(const Tensor& out, const Tensor& in, WindowAt&& window_at) {
  using S = acc_t<T>;
  const Tensor& x = Backward ? out : in;
  const Tensor& y = Backward ? in : out;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const View4<const T> iv(in);
  const View4<T> ov(out);
  parallel_for(N * C, N * C * (OH * OW + H * W) >= kParallelGrain, [&](int64_t nc) {
    const int64_t n = nc / C, c = nc % C;
    std::vector<S> plane(Backward ? static_cast<size_t>(H * W) : 0, S(0));
    for (int64_t i = 0; i < OH; ++i) {
      for (int64_t j = 0; j < OW; ++j) {
        const AvgWindow a = window_at(i, j);
        if constexpr (Backward) {
          const S g = static_cast<S>(iv.at(n, c, i, j)) / static_cast<S>(a.divisor);
          for (int64_t h = a.h.lo; h < a.h.hi; ++h)
            for (int64_t w = a.w.lo; w < a.w.hi; ++w) plane[static_cast<size_t>(h * W + w)] += g;
        } else {
          S s = 0;
          for (int64_t h = a.h.lo; h < a.h.hi; ++h)
            for (int64_t w = a.w.lo; w < a.w.hi; ++w) s += static_cast<S>(iv.at(n, c, h, w));
          ov.at(n, c, i, j) = static_cast<T>(a.divisor > 0 ? s / static_cast<S>(a.divisor) : S(0));
        }
      }
    }
    if constexpr (Backward) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) ov.at(n, c, h, w) = static_cast<T>(plane[static_cast<size_t>(h * W + w)]);
    }
  });
}

template <typename T, bool Backward>
void avg_pool2d_typed(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  const Tensor& x = Backward ? out : in;
  const int64_t H = x.size(2), W = x.size(3);
  avg_pool_planes<T, Backward>(out, in, [&](int64_t i, int64_t j) {
    const Window wh = avg_window(i, H, p.kernel[0], p.stride[0], p.padding[0]);
    const Window ww = avg_window(j, W, p.kernel[1], p.stride[1], p.padding[1]);
    return AvgWindow{wh, ww, p.count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo)};
  });
}

// Output (i, j) of an OH x OW adaptive pool averages rows
// [floor(i H / OH), ceil((i + 1) H / OH)) and likewise for columns.
template <typename T, bool Backward>
void adaptive_avg_pool2d_typed(const Tensor& out, const Tensor& in) {
  const Tensor& x = Backward ? out : in;
  const Tensor& y = Backward ? in : out;
  const int64_t H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  avg_pool_planes<T, Backward>(out, in, [&](int64_t i, int64_t j) {
    const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
    const int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
    return AvgWindow{{h0, h1, h1 - h0}, {w0, w1, w1 - w0}, (h1 - h0) * (w1 - w0)};
  });
}

// ---- batch norm -----------------------------------------------------------------------------

// One channel of a 4-D view as N runs of `inner` elements `step` apart
// (H*W of them when the rows are dense, as in NCHW and NHWC; else W runs per
// (n, h)), so the per-channel loops are plain strided loops.
// sum_k f(p[k * step]) in double, in a fixed order: four interleaved partial
// sums when step == 1 (so the adds overlap), then one more for the tail.
template <typename T, typename F>
double run_sum(const T* p, int64_t n, int64_t step, F&& f) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t k = 0;
  if (step == 1) {
    for (; k + 4 <= n; k += 4) {
      a0 += f(p[k]);
      a1 += f(p[k + 1]);
      a2 += f(p[k + 2]);
      a3 += f(p[k + 3]);
    }
  }
  for (; k < n; ++k) a0 += f(p[k * step]);
  return (a0 + a1) + (a2 + a3);
}

template <typename T>
bool dense_rows(const View4<T>& v, int64_t H, int64_t W) {
  return H == 1 || v.s2 == W * v.s3;
}

struct ChannelRuns {
  int64_t outer, inner, step, outer_n, s_n, s_h;
  // flat: every view walked together has dense rows (s2 == W * s3), so all take one shape.
  template <typename T>
  ChannelRuns(const View4<T>& v, int64_t N, int64_t H, int64_t W, bool flat) {
    if (flat) {
      outer = N, inner = H * W, step = v.s3, outer_n = 1, s_n = v.s0, s_h = 0;
    } else {
      outer = N * H, inner = W, step = v.s3, outer_n = H, s_n = v.s0, s_h = v.s2;
    }
  }
  int64_t base(int64_t r) const { return (r / outer_n) * s_n + (r % outer_n) * s_h; }
};

template <typename T>
void batch_norm_forward_typed(const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const Tensor& rm, const Tensor& rv,
                              bool training, double momentum, double eps) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), m = N * H * W;
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const bool flat = dense_rows(xv, H, W) && dense_rows(yv, H, W);
  const ChannelRuns xr(xv, N, H, W, flat), yr(yv, N, H, W, flat);
  S* mean_out = static_cast<S*>(save_mean.data_ptr());
  S* rstd_out = static_cast<S*>(save_rstd.data_ptr());
  const S* wp = weight.defined() ? static_cast<const S*>(weight.data_ptr()) : nullptr;
  const S* bp = bias.defined() ? static_cast<const S*>(bias.data_ptr()) : nullptr;
  S* rmp = rm.defined() ? static_cast<S*>(rm.data_ptr()) : nullptr;
  S* rvp = rv.defined() ? static_cast<S*>(rv.data_ptr()) : nullptr;
  // The vector kernels (kernels/cpu/vec_math.h) for dense runs of f32 and
  // 16-bit values: the sums in double lanes, the normalisation in f32 lanes
  // rounded once; the loops below are their reference (HG_CPU_MATH=scalar).
  const VecMathTable* vt = nullptr;
  if constexpr (kHasVecType<T>) vt = xr.step == 1 && yr.step == 1 ? vec_math() : nullptr;
  parallel_for(C, N * C * H * W >= kParallelGrain, [&](int64_t c) {
    const T* xc = xv.p + c * xv.s1;
    double mean, rstd;
    if (training) {  // two passes in double: mean, then the centred sum of squares
      double sum = 0;
      for (int64_t r = 0; r < xr.outer; ++r) {
        sum += vt != nullptr ? vt->sum_f64(vec_type_of<T>(), xc + xr.base(r), xr.inner, 0.0, false)
                             : run_sum(xc + xr.base(r), xr.inner, xr.step, [](T v) { return static_cast<double>(v); });
      }
      mean = sum / static_cast<double>(m);
      double ss = 0;
      for (int64_t r = 0; r < xr.outer; ++r) {
        ss += vt != nullptr ? vt->sum_f64(vec_type_of<T>(), xc + xr.base(r), xr.inner, mean, true)
                            : run_sum(xc + xr.base(r), xr.inner, xr.step, [mean](T v) {
                                const double d = static_cast<double>(v) - mean;
                                return d * d;
                              });
      }
      const double var = ss / static_cast<double>(m);
      rstd = 1.0 / std::sqrt(var + eps);
      if (rmp != nullptr) {
        rmp[c] = static_cast<S>((1.0 - momentum) * static_cast<double>(rmp[c]) + momentum * mean);
        const double unbiased = m > 1 ? ss / static_cast<double>(m - 1) : var;
        rvp[c] = static_cast<S>((1.0 - momentum) * static_cast<double>(rvp[c]) + momentum * unbiased);
      }
    } else {
      mean = static_cast<double>(rmp[c]);
      rstd = 1.0 / std::sqrt(static_cast<double>(rvp[c]) + eps);
    }
    mean_out[c] = static_cast<S>(mean);
    rstd_out[c] = static_cast<S>(rstd);
    // y = (x - mean) * rstd * w + b, in S, from the stored (rounded) statistics.
    const S sm = mean_out[c], si = rstd_out[c];
    const S scale = si * (wp ? wp[c] : S(1)), bc = bp ? bp[c] : S(0);
    T* yc = yv.p + c * yv.s1;
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      T* q = yc + yr.base(r);
      if (vt != nullptr) {
        vt->affine(vec_type_of<T>(), p, q, xr.inner, sm, scale, bc);
      } else if (xr.step == 1 && yr.step == 1) {  // NCHW: a plain loop the compiler vectorises
        for (int64_t k = 0; k < xr.inner; ++k) q[k] = static_cast<T>((static_cast<S>(p[k]) - sm) * scale + bc);
      } else {
        for (int64_t k = 0; k < xr.inner; ++k)
          q[k * yr.step] = static_cast<T>((static_cast<S>(p[k * xr.step]) - sm) * scale + bc);
      }
    }
  });
}

template <typename T>
void batch_norm_backward_typed(const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_y,
                               const Tensor& x, const Tensor& weight, const Tensor& save_mean, const Tensor& save_rstd,
                               bool training) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), m = N * H * W;
  const View4<const T> xv(x), dyv(d_y);
  const bool flat =
      dense_rows(xv, H, W) && dense_rows(dyv, H, W) && (!d_x.defined() || dense_rows(View4<const T>(d_x), H, W));
  const ChannelRuns xr(xv, N, H, W, flat), gr(dyv, N, H, W, flat);
  const S* mp = static_cast<const S*>(save_mean.data_ptr());
  const S* ip = static_cast<const S*>(save_rstd.data_ptr());
  const S* wp = weight.defined() ? static_cast<const S*>(weight.data_ptr()) : nullptr;
  S* dwp = d_weight.defined() ? static_cast<S*>(d_weight.data_ptr()) : nullptr;
  S* dbp = d_bias.defined() ? static_cast<S*>(d_bias.data_ptr()) : nullptr;
  // The vector kernels for dense runs of f32 and 16-bit values (as in the forward).
  const VecMathTable* vt = nullptr;
  if constexpr (kHasVecType<T>) {
    const bool dense_dx = !d_x.defined() || ChannelRuns(View4<T>(d_x), N, H, W, flat).step == 1;
    vt = xr.step == 1 && gr.step == 1 && dense_dx ? vec_math() : nullptr;
  }
  parallel_for(C, N * C * H * W >= kParallelGrain, [&](int64_t c) {
    const double mean = static_cast<double>(mp[c]), rstd = static_cast<double>(ip[c]);
    const T* xc = xv.p + c * xv.s1;
    const T* gc = dyv.p + c * dyv.s1;
    // sum(d_y) and sum(d_y * (x - mean)) in double; xhat = (x - mean) * rstd.
    double sum_dy = 0, sum_dy_xc = 0;
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      const T* g = gc + gr.base(r);
      if (vt != nullptr) {
        double sg = 0, sgx = 0;
        vt->dot_f64(vec_type_of<T>(), g, p, xr.inner, mean, &sg, &sgx);
        sum_dy += sg;
        sum_dy_xc += sgx;
        continue;
      }
      for (int64_t k = 0; k < xr.inner; ++k) {
        const double gk = static_cast<double>(g[k * gr.step]);
        sum_dy += gk;
        sum_dy_xc += gk * (static_cast<double>(p[k * xr.step]) - mean);
      }
    }
    const double sum_dy_xhat = sum_dy_xc * rstd;
    if (dwp) dwp[c] = static_cast<S>(sum_dy_xhat);
    if (dbp) dbp[c] = static_cast<S>(sum_dy);
    if (!d_x.defined()) return;
    const View4<T> dxv(d_x);
    const ChannelRuns dr(dxv, N, H, W, flat);
    T* dc = dxv.p + c * dxv.s1;
    const double wc = wp ? static_cast<double>(wp[c]) : 1.0;
    // training: d_x = k * (m*d_y - sum_dy - xhat*sum_dy_xhat), k = w*rstd/m; eval: d_x = w*rstd*d_y.
    const S k = static_cast<S>(training ? wc * rstd / static_cast<double>(m) : wc * rstd);
    const S a = static_cast<S>(sum_dy), b = static_cast<S>(sum_dy_xhat), fm = static_cast<S>(m);
    const S sm = static_cast<S>(mean), si = static_cast<S>(rstd);
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      const T* g = gc + gr.base(r);
      T* q = dc + dr.base(r);
      if (training && vt != nullptr) {
        vt->bn_dx(vec_type_of<T>(), g, p, q, xr.inner, sm, si, k, fm, a, b);
      } else if (training && xr.step == 1 && gr.step == 1 && dr.step == 1) {  // NCHW: vectorised
        for (int64_t j = 0; j < xr.inner; ++j) {
          const S xhat = (static_cast<S>(p[j]) - sm) * si;
          q[j] = static_cast<T>(k * (fm * static_cast<S>(g[j]) - a - xhat * b));
        }
      } else if (training) {
        for (int64_t j = 0; j < xr.inner; ++j) {
          const S xhat = (static_cast<S>(p[j * xr.step]) - sm) * si;
          q[j * dr.step] = static_cast<T>(k * (fm * static_cast<S>(g[j * gr.step]) - a - xhat * b));
        }
      } else {
        for (int64_t j = 0; j < xr.inner; ++j) q[j * dr.step] = static_cast<T>(k * static_cast<S>(g[j * gr.step]));
      }
    }
  });
}

}  // namespace

void max_pool2d_forward(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  dispatch_floating(x.dtype(), "max_pool2d",
                    [&](auto tag) { max_pool2d_forward_typed<decltype(tag)>(y, indices, x, p); });
}

void max_pool2d_backward(const Tensor& d_x, const Tensor& d_y, const Tensor& indices, const Pool2dParams& p) {
  dispatch_floating(d_x.dtype(), "max_pool2d_backward",
                    [&](auto tag) { max_pool2d_backward_typed<decltype(tag)>(d_x, d_y, indices, p); });
}

void avg_pool2d_forward(const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  dispatch_floating(x.dtype(), "avg_pool2d", [&](auto tag) { avg_pool2d_typed<decltype(tag), false>(y, x, p); });
}

void avg_pool2d_backward(const Tensor& d_x, const Tensor& d_y, const Pool2dParams& p) {
  dispatch_floating(d_x.dtype(), "avg_pool2d_backward",
                    [&](auto tag) { avg_pool2d_typed<decltype(tag), true>(d_x, d_y, p); });
}

void adaptive_avg_pool2d_forward(const Tensor& y, const Tensor& x) {
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d",
                    [&](auto tag) { adaptive_avg_pool2d_typed<decltype(tag), false>(y, x); });
}

void adaptive_avg_pool2d_backward(const Tensor& d_x, const Tensor& d_y) {
  dispatch_floating(d_x.dtype(), "adaptive_avg_pool2d_backward",
                    [&](auto tag) { adaptive_avg_pool2d_typed<decltype(tag), true>(d_x, d_y); });
}

void batch_norm_forward(const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        bool training, double momentum, double eps) {
  dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    batch_norm_forward_typed<decltype(tag)>(y, save_mean, save_rstd, x, weight, bias, running_mean, running_var,
                                            training, momentum, eps);
  });
}

void batch_norm_backward(const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_y,
                         const Tensor& x, const Tensor& weight, const Tensor& save_mean, const Tensor& save_rstd,
                         bool training) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&](auto tag) {
    batch_norm_backward_typed<decltype(tag)>(d_x, d_weight, d_bias, d_y, x, weight, save_mean, save_rstd, training);
  });
}

}  // namespace hg::cpu
