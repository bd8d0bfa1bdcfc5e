// CPU convolution (im2col/col2im over OpenBLAS GEMM), pooling and batch
// normalisation: the references for the CUDA kernels (formulas in
// kernels/conv.h). Every tensor is read and written through its strides, so
// NCHW and channels-last take the same code without a copy.
//
// Convolution, per chunk of images and per group (S = float, double for f64):
//   col[Kg, nb*P]  = im2col(x)                  Kg = Cg*KH*KW, P = OH*OW
//   out[Og, nb*P]  = W_g[Og, Kg] @ col          (one GEMM per group and chunk)
//   dW_g          += dy_g[Og, nb*P] @ col^T
//   dcol[Kg, nb*P] = W_g^T @ dy_g,  dx = col2im(dcol)
// Chunks keep col under kColLimit elements; the GEMMs run OpenBLAS's threads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu/loops.h"
#include "kernels/gemm.h"

namespace hg::cpu {

namespace {

constexpr int64_t kColLimit = int64_t{1} << 23;  // elements of one im2col buffer (32 MiB in f32)

template <typename S>
constexpr DType dtype_of_acc() {
  return std::is_same_v<S, double> ? kF64 : kF32;
}

// A 4-D strided view with typed loads and stores.
template <typename T>
struct View4 {
  T* p;
  int64_t s0, s1, s2, s3;
  explicit View4(const Tensor& t)
      : p(static_cast<T*>(t.data_ptr())), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  T& at(int64_t n, int64_t c, int64_t h, int64_t w) const { return p[n * s0 + c * s1 + h * s2 + w * s3]; }
};

template <typename S, typename T>
void gemm_acc(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda, const S* b, int64_t ldb, S* c,
              int64_t ldc, float beta) {
  GemmArgs g;
  g.dtype = dtype_of_acc<S>();
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.beta = beta;
  gemm(g);
}

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, G, Cg, Og, Kg, P;
  Conv2dParams p;
  ConvGeom(const Tensor& x, const Tensor& w, int64_t oh, int64_t ow, const Conv2dParams& prm)
      : N(x.size(0)),
        C(x.size(1)),
        H(x.size(2)),
        W(x.size(3)),
        O(w.size(0)),
        KH(w.size(2)),
        KW(w.size(3)),
        OH(oh),
        OW(ow),
        G(prm.groups),
        Cg(C / prm.groups),
        Og(w.size(0) / prm.groups),
        Kg(C / prm.groups * w.size(2) * w.size(3)),
        P(oh * ow),
        p(prm) {}
  int64_t chunk() const { return std::max<int64_t>(1, std::min<int64_t>(N, kColLimit / std::max<int64_t>(Kg * P, 1))); }
};

// col[r, (n-n0)*P + i*OW + j], r = (c*KH + kh)*KW + kw, c within group g.
template <typename S, typename T>
void im2col(const View4<const T>& x, const ConvGeom& g, int64_t grp, int64_t n0, int64_t nb, S* col) {
  const int64_t cols = nb * g.P;
#pragma omp parallel for schedule(static) if (g.Kg * cols >= kParallelGrain)
  for (int64_t r = 0; r < g.Kg; ++r) {
    const int64_t kw = r % g.KW, kh = (r / g.KW) % g.KH, c = grp * g.Cg + r / (g.KW * g.KH);
    S* out = col + r * cols;
    for (int64_t n = 0; n < nb; ++n) {
      for (int64_t i = 0; i < g.OH; ++i) {
        const int64_t ih = i * g.p.stride[0] - g.p.pad_lo[0] + kh * g.p.dilation[0];
        S* row = out + n * g.P + i * g.OW;
        if (ih < 0 || ih >= g.H) {
          std::fill(row, row + g.OW, S(0));
          continue;
        }
        // Columns j with 0 <= iw = j*s + off < W form one range [j0, j1).
        const int64_t s = g.p.stride[1], off = kw * g.p.dilation[1] - g.p.pad_lo[1];
        const int64_t j0 = std::min(g.OW, off >= 0 ? 0 : (-off + s - 1) / s);
        const int64_t j1 = std::max(j0, std::min(g.OW, g.W - off > 0 ? (g.W - off + s - 1) / s : 0));
        std::fill(row, row + j0, S(0));
        const T* src = &x.at(n0 + n, c, ih, 0) + off * x.s3;
        const int64_t step = s * x.s3;
        for (int64_t j = j0; j < j1; ++j) row[j] = static_cast<S>(src[j * step]);
        std::fill(row + j1, row + g.OW, S(0));
      }
    }
  }
}

// dx_buf[n, c - grp*Cg, ih, iw] += dcol (dense [nb, Cg, H, W] per group).
template <typename S>
void col2im(const S* dcol, const ConvGeom& g, int64_t nb, S* dx_buf) {
  const int64_t cols = nb * g.P;
#pragma omp parallel for schedule(static) if (g.Kg * cols >= kParallelGrain)
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const S* row = dcol + ((c * g.KH + kh) * g.KW + kw) * cols;
        for (int64_t n = 0; n < nb; ++n) {
          S* plane = dx_buf + (n * g.Cg + c) * g.H * g.W;
          for (int64_t i = 0; i < g.OH; ++i) {
            const int64_t ih = i * g.p.stride[0] - g.p.pad_lo[0] + kh * g.p.dilation[0];
            if (ih < 0 || ih >= g.H) continue;
            const S* src = row + n * g.P + i * g.OW;
            for (int64_t j = 0; j < g.OW; ++j) {
              const int64_t iw = j * g.p.stride[1] - g.p.pad_lo[1] + kw * g.p.dilation[1];
              if (iw >= 0 && iw < g.W) plane[ih * g.W + iw] += src[j];
            }
          }
        }
      }
    }
  }
}

// w[o, c, kh, kw] (any strides) -> dense S [O, Kg].
template <typename S, typename T>
std::vector<S> dense_weight(const Tensor& w, const ConvGeom& g) {
  std::vector<S> out(static_cast<size_t>(g.O * g.Kg));
  const View4<const T> wv(w);
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
          out[static_cast<size_t>(o * g.Kg + (c * g.KH + kh) * g.KW + kw)] = static_cast<S>(wv.at(o, c, kh, kw));
  return out;
}

template <typename T>
void conv2d_forward_typed(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                          const Conv2dParams& prm) {
  using S = acc_t<T>;
  const ConvGeom g(x, w, y.size(2), y.size(3), prm);
  const std::vector<S> wd = dense_weight<S, T>(w, g);
  std::vector<S> b(static_cast<size_t>(g.O), S(0));
  if (bias.defined()) {
    const T* bp = static_cast<const T*>(bias.data_ptr());
    for (int64_t o = 0; o < g.O; ++o) b[static_cast<size_t>(o)] = static_cast<S>(bp[o * bias.stride(0)]);
  }
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const int64_t nbmax = g.chunk();
  const std::unique_ptr<S[]> col(new S[static_cast<size_t>(g.Kg * nbmax * g.P)]);  // no zero-fill: every
  const std::unique_ptr<S[]> out(new S[static_cast<size_t>(g.Og * nbmax * g.P)]);  // element is written
  for (int64_t n0 = 0; n0 < g.N; n0 += nbmax) {
    const int64_t nb = std::min(nbmax, g.N - n0), cols = nb * g.P;
    for (int64_t grp = 0; grp < g.G; ++grp) {
      im2col<S, T>(xv, g, grp, n0, nb, col.get());
      gemm_acc<S, T>(false, false, g.Og, cols, g.Kg, wd.data() + grp * g.Og * g.Kg, g.Kg, col.get(), cols, out.get(),
                     cols, 0.0f);
#pragma omp parallel for schedule(static) if (g.Og * cols >= kParallelGrain)
      for (int64_t o = 0; o < g.Og; ++o) {
        const int64_t oc = grp * g.Og + o;
        const S bo = b[static_cast<size_t>(oc)];
        for (int64_t n = 0; n < nb; ++n)
          for (int64_t i = 0; i < g.OH; ++i)
            for (int64_t j = 0; j < g.OW; ++j)
              yv.at(n0 + n, oc, i, j) =
                  static_cast<T>(out[static_cast<size_t>(o * cols + n * g.P + i * g.OW + j)] + bo);
      }
    }
  }
}

template <typename T>
void conv2d_backward_typed(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                           const Tensor& w, const Conv2dParams& prm) {
  using S = acc_t<T>;
  const ConvGeom g(x, w, dy.size(2), dy.size(3), prm);
  const View4<const T> xv(x), dyv(dy);
  if (db.defined()) {  // db[o] = sum over n, i, j of dy (double sums, one rounding)
    T* dbp = static_cast<T*>(db.data_ptr());
#pragma omp parallel for schedule(static) if (g.N * g.O * g.P >= kParallelGrain)
    for (int64_t o = 0; o < g.O; ++o) {
      double s = 0;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t i = 0; i < g.OH; ++i)
          for (int64_t j = 0; j < g.OW; ++j) s += static_cast<double>(dyv.at(n, o, i, j));
      dbp[o * db.stride(0)] = static_cast<T>(s);
    }
  }
  if (!dx.defined() && !dw.defined()) return;
  const std::vector<S> wd = dense_weight<S, T>(w, g);
  std::vector<S> dwd(dw.defined() ? static_cast<size_t>(g.O * g.Kg) : 0, S(0));
  const int64_t nbmax = g.chunk();
  const std::unique_ptr<S[]> col(new S[static_cast<size_t>(g.Kg * nbmax * g.P)]);
  const std::unique_ptr<S[]> dyg(new S[static_cast<size_t>(g.Og * nbmax * g.P)]);
  std::vector<S> dxb(dx.defined() ? static_cast<size_t>(nbmax * g.Cg * g.H * g.W) : 0);
  const View4<T> dxv = dx.defined() ? View4<T>(dx) : View4<T>(dy);
  bool first_chunk = true;
  for (int64_t n0 = 0; n0 < g.N; n0 += nbmax) {
    const int64_t nb = std::min(nbmax, g.N - n0), cols = nb * g.P;
    for (int64_t grp = 0; grp < g.G; ++grp) {
#pragma omp parallel for schedule(static) if (g.Og * cols >= kParallelGrain)
      for (int64_t o = 0; o < g.Og; ++o)
        for (int64_t n = 0; n < nb; ++n)
          for (int64_t i = 0; i < g.OH; ++i)
            for (int64_t j = 0; j < g.OW; ++j)
              dyg[static_cast<size_t>(o * cols + n * g.P + i * g.OW + j)] =
                  static_cast<S>(dyv.at(n0 + n, grp * g.Og + o, i, j));
      if (dw.defined()) {
        im2col<S, T>(xv, g, grp, n0, nb, col.get());
        gemm_acc<S, T>(false, true, g.Og, g.Kg, cols, dyg.get(), cols, col.get(), cols, dwd.data() + grp * g.Og * g.Kg,
                       g.Kg, first_chunk ? 0.0f : 1.0f);
      }
      if (dx.defined()) {
        // dcol reuses col (im2col of this group is no longer needed).
        gemm_acc<S, T>(true, false, g.Kg, cols, g.Og, wd.data() + grp * g.Og * g.Kg, g.Kg, dyg.get(), cols, col.get(),
                       cols, 0.0f);
        std::fill(dxb.begin(), dxb.begin() + nb * g.Cg * g.H * g.W, S(0));
        col2im<S>(col.get(), g, nb, dxb.data());
#pragma omp parallel for schedule(static) if (nb * g.Cg * g.H * g.W >= kParallelGrain)
        for (int64_t c = 0; c < g.Cg; ++c)
          for (int64_t n = 0; n < nb; ++n)
            for (int64_t h = 0; h < g.H; ++h)
              for (int64_t ww = 0; ww < g.W; ++ww)
                dxv.at(n0 + n, grp * g.Cg + c, h, ww) =
                    static_cast<T>(dxb[static_cast<size_t>(((n * g.Cg + c) * g.H + h) * g.W + ww)]);
      }
    }
    first_chunk = false;
  }
  if (dw.defined()) {
    const View4<T> dwv(dw);
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t kh = 0; kh < g.KH; ++kh)
          for (int64_t kw = 0; kw < g.KW; ++kw)
            dwv.at(o, c, kh, kw) = static_cast<T>(dwd[static_cast<size_t>(o * g.Kg + (c * g.KH + kh) * g.KW + kw)]);
  }
}

// ---- pooling --------------------------------------------------------------------------------

// if (v > best || isnan(v)) { best = v; arg = at; } without a branch (random
// data defeats the predictor): bit masks select the value and the index.
template <typename S>
inline void select_max(S v, int64_t at, S& best, int64_t& arg) {
  using U = std::conditional_t<sizeof(S) == 8, uint64_t, uint32_t>;
  const bool take = (v > best) | (v != v);
  const U mask = U(0) - static_cast<U>(take);
  U vb, bb;
  std::memcpy(&vb, &v, sizeof(S));
  std::memcpy(&bb, &best, sizeof(S));
  bb = (vb & mask) | (bb & ~mask);
  std::memcpy(&best, &bb, sizeof(S));
  const int64_t imask = -static_cast<int64_t>(take);
  arg = (at & imask) | (arg & ~imask);
}

template <typename T>
void max_pool2d_forward_typed(const Tensor& y, const Tensor& idx, const Tensor& x, const Pool2dParams& p) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const View4<int64_t> iv(idx);
  // The common 2x2 / stride 2 window without padding, every window inside:
  // the same comparisons in the same (row-major) order, no bounds arithmetic.
  const bool k2s2 = p.kernel == std::array<int64_t, 2>{2, 2} && p.stride == std::array<int64_t, 2>{2, 2} &&
                    p.padding == std::array<int64_t, 2>{0, 0} && p.dilation == std::array<int64_t, 2>{1, 1} &&
                    2 * OH <= H && 2 * OW <= W;
  if (k2s2) {
#pragma omp parallel for collapse(2) schedule(static) if (N * C * OH * OW >= kParallelGrain)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = xv.p + n * xv.s0 + c * xv.s1;
        for (int64_t i = 0; i < OH; ++i) {
          const T* r0 = xp + 2 * i * xv.s2;
          const T* r1 = r0 + xv.s2;
          for (int64_t j = 0; j < OW; ++j) {
            const int64_t w = 2 * j, at = 2 * i * W + w;
            const S cand[4] = {static_cast<S>(r0[w * xv.s3]), static_cast<S>(r0[(w + 1) * xv.s3]),
                               static_cast<S>(r1[w * xv.s3]), static_cast<S>(r1[(w + 1) * xv.s3])};
            const int64_t where[4] = {at, at + 1, at + W, at + W + 1};
            S best = -std::numeric_limits<S>::infinity();
            int64_t arg = at;
            for (int q = 0; q < 4; ++q) select_max(cand[q], where[q], best, arg);
            yv.at(n, c, i, j) = static_cast<T>(best);
            iv.at(n, c, i, j) = arg;
          }
        }
      }
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) if (N * C * OH * OW >= kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
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
    }
  }
}

template <typename T>
void max_pool2d_backward_typed(const Tensor& dx, const Tensor& dy, const Tensor& idx) {
  using S = acc_t<T>;
  const int64_t N = dx.size(0), C = dx.size(1), W = dx.size(3), OH = dy.size(2), OW = dy.size(3);
  const View4<const T> dyv(dy);
  const View4<const int64_t> iv(idx);
  const View4<T> dxv(dx);
  // Overlapping windows may route several dy to one x: sum per plane in S.
#pragma omp parallel for collapse(2) schedule(static) if (N * C * OH * OW >= kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      std::vector<S> plane(static_cast<size_t>(dx.size(2) * W), S(0));
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j)
          plane[static_cast<size_t>(iv.at(n, c, i, j))] += static_cast<S>(dyv.at(n, c, i, j));
      for (int64_t h = 0; h < dx.size(2); ++h)
        for (int64_t w = 0; w < W; ++w) dxv.at(n, c, h, w) = static_cast<T>(plane[static_cast<size_t>(h * W + w)]);
    }
  }
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

template <typename T, bool Backward>
void avg_pool2d_typed(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  using S = acc_t<T>;
  // Forward: out = y, in = x. Backward: out = dx, in = dy.
  const Tensor& x = Backward ? out : in;
  const Tensor& y = Backward ? in : out;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const View4<const T> iv(in);
  const View4<T> ov(out);
#pragma omp parallel for collapse(2) schedule(static) if (N * C * OH * OW >= kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      std::vector<S> plane(Backward ? static_cast<size_t>(H * W) : 0, S(0));
      for (int64_t i = 0; i < OH; ++i) {
        const Window wh = avg_window(i, H, p.kernel[0], p.stride[0], p.padding[0]);
        for (int64_t j = 0; j < OW; ++j) {
          const Window ww = avg_window(j, W, p.kernel[1], p.stride[1], p.padding[1]);
          const int64_t div = p.count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
          if constexpr (Backward) {
            const S g = static_cast<S>(iv.at(n, c, i, j)) / static_cast<S>(div);
            for (int64_t h = wh.lo; h < wh.hi; ++h)
              for (int64_t w = ww.lo; w < ww.hi; ++w) plane[static_cast<size_t>(h * W + w)] += g;
          } else {
            S s = 0;
            for (int64_t h = wh.lo; h < wh.hi; ++h)
              for (int64_t w = ww.lo; w < ww.hi; ++w) s += static_cast<S>(iv.at(n, c, h, w));
            ov.at(n, c, i, j) = static_cast<T>(div > 0 ? s / static_cast<S>(div) : S(0));
          }
        }
      }
      if constexpr (Backward) {
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) ov.at(n, c, h, w) = static_cast<T>(plane[static_cast<size_t>(h * W + w)]);
      }
    }
  }
}

template <typename T, bool Backward>
void adaptive_avg_pool2d_typed(const Tensor& out, const Tensor& in) {
  using S = acc_t<T>;
  const Tensor& x = Backward ? out : in;
  const Tensor& y = Backward ? in : out;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const View4<const T> iv(in);
  const View4<T> ov(out);
#pragma omp parallel for collapse(2) schedule(static) if (N * C * H * W >= kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      std::vector<S> plane(Backward ? static_cast<size_t>(H * W) : 0, S(0));
      for (int64_t i = 0; i < OH; ++i) {
        const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
        for (int64_t j = 0; j < OW; ++j) {
          const int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
          const S cnt = static_cast<S>((h1 - h0) * (w1 - w0));
          if constexpr (Backward) {
            const S g = static_cast<S>(iv.at(n, c, i, j)) / cnt;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) plane[static_cast<size_t>(h * W + w)] += g;
          } else {
            S s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += static_cast<S>(iv.at(n, c, h, w));
            ov.at(n, c, i, j) = static_cast<T>(s / cnt);
          }
        }
      }
      if constexpr (Backward) {
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) ov.at(n, c, h, w) = static_cast<T>(plane[static_cast<size_t>(h * W + w)]);
      }
    }
  }
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
void batch_norm_forward_typed(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const Tensor& rm, const Tensor& rv,
                              bool training, double momentum, double eps) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), m = N * H * W;
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const bool flat = dense_rows(xv, H, W) && dense_rows(yv, H, W);
  const ChannelRuns xr(xv, N, H, W, flat), yr(yv, N, H, W, flat);
  S* mean_out = static_cast<S*>(save_mean.data_ptr());
  S* invstd_out = static_cast<S*>(save_invstd.data_ptr());
  const S* wp = weight.defined() ? static_cast<const S*>(weight.data_ptr()) : nullptr;
  const S* bp = bias.defined() ? static_cast<const S*>(bias.data_ptr()) : nullptr;
  S* rmp = rm.defined() ? static_cast<S*>(rm.data_ptr()) : nullptr;
  S* rvp = rv.defined() ? static_cast<S*>(rv.data_ptr()) : nullptr;
#pragma omp parallel for schedule(static) if (N * C * H * W >= kParallelGrain)
  for (int64_t c = 0; c < C; ++c) {
    const T* xc = xv.p + c * xv.s1;
    double mean, invstd;
    if (training) {  // two passes in double, fixed order: mean, then the centred sum of squares
      double sum = 0;
      for (int64_t r = 0; r < xr.outer; ++r)
        sum += run_sum(xc + xr.base(r), xr.inner, xr.step, [](T v) { return static_cast<double>(v); });
      mean = sum / static_cast<double>(m);
      double ss = 0;
      for (int64_t r = 0; r < xr.outer; ++r) {
        ss += run_sum(xc + xr.base(r), xr.inner, xr.step, [mean](T v) {
          const double d = static_cast<double>(v) - mean;
          return d * d;
        });
      }
      const double var = ss / static_cast<double>(m);
      invstd = 1.0 / std::sqrt(var + eps);
      if (rmp != nullptr) {
        rmp[c] = static_cast<S>((1.0 - momentum) * static_cast<double>(rmp[c]) + momentum * mean);
        const double unbiased = m > 1 ? ss / static_cast<double>(m - 1) : var;
        rvp[c] = static_cast<S>((1.0 - momentum) * static_cast<double>(rvp[c]) + momentum * unbiased);
      }
    } else {
      mean = static_cast<double>(rmp[c]);
      invstd = 1.0 / std::sqrt(static_cast<double>(rvp[c]) + eps);
    }
    mean_out[c] = static_cast<S>(mean);
    invstd_out[c] = static_cast<S>(invstd);
    // y = (x - mean) * invstd * w + b, in S, from the stored (rounded) statistics.
    const S sm = mean_out[c], si = invstd_out[c];
    const S scale = si * (wp ? wp[c] : S(1)), bc = bp ? bp[c] : S(0);
    T* yc = yv.p + c * yv.s1;
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      T* q = yc + yr.base(r);
      if (xr.step == 1 && yr.step == 1) {  // NCHW: a plain loop the compiler vectorises
        for (int64_t k = 0; k < xr.inner; ++k) q[k] = static_cast<T>((static_cast<S>(p[k]) - sm) * scale + bc);
      } else {
        for (int64_t k = 0; k < xr.inner; ++k)
          q[k * yr.step] = static_cast<T>((static_cast<S>(p[k * xr.step]) - sm) * scale + bc);
      }
    }
  }
}

template <typename T>
void batch_norm_backward_typed(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                               const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd, bool training) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), m = N * H * W;
  const View4<const T> xv(x), dyv(dy);
  const bool flat =
      dense_rows(xv, H, W) && dense_rows(dyv, H, W) && (!dx.defined() || dense_rows(View4<const T>(dx), H, W));
  const ChannelRuns xr(xv, N, H, W, flat), gr(dyv, N, H, W, flat);
  const S* mp = static_cast<const S*>(save_mean.data_ptr());
  const S* ip = static_cast<const S*>(save_invstd.data_ptr());
  const S* wp = weight.defined() ? static_cast<const S*>(weight.data_ptr()) : nullptr;
  S* dwp = dweight.defined() ? static_cast<S*>(dweight.data_ptr()) : nullptr;
  S* dbp = dbias.defined() ? static_cast<S*>(dbias.data_ptr()) : nullptr;
#pragma omp parallel for schedule(static) if (N * C * H * W >= kParallelGrain)
  for (int64_t c = 0; c < C; ++c) {
    const double mean = static_cast<double>(mp[c]), invstd = static_cast<double>(ip[c]);
    const T* xc = xv.p + c * xv.s1;
    const T* gc = dyv.p + c * dyv.s1;
    // sum(dy) and sum(dy * (x - mean)) in double, fixed order; xhat = (x - mean) * invstd.
    double sum_dy = 0, sum_dy_xc = 0;
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      const T* g = gc + gr.base(r);
      for (int64_t k = 0; k < xr.inner; ++k) {
        const double gk = static_cast<double>(g[k * gr.step]);
        sum_dy += gk;
        sum_dy_xc += gk * (static_cast<double>(p[k * xr.step]) - mean);
      }
    }
    const double sum_dy_xhat = sum_dy_xc * invstd;
    if (dwp) dwp[c] = static_cast<S>(sum_dy_xhat);
    if (dbp) dbp[c] = static_cast<S>(sum_dy);
    if (!dx.defined()) continue;
    const View4<T> dxv(dx);
    const ChannelRuns dr(dxv, N, H, W, flat);
    T* dc = dxv.p + c * dxv.s1;
    const double wc = wp ? static_cast<double>(wp[c]) : 1.0;
    // training: dx = k * (m*dy - sum_dy - xhat*sum_dy_xhat), k = w*invstd/m; eval: dx = w*invstd*dy.
    const S k = static_cast<S>(training ? wc * invstd / static_cast<double>(m) : wc * invstd);
    const S a = static_cast<S>(sum_dy), b = static_cast<S>(sum_dy_xhat), fm = static_cast<S>(m);
    const S sm = static_cast<S>(mean), si = static_cast<S>(invstd);
    for (int64_t r = 0; r < xr.outer; ++r) {
      const T* p = xc + xr.base(r);
      const T* g = gc + gr.base(r);
      T* q = dc + dr.base(r);
      if (training && xr.step == 1 && gr.step == 1 && dr.step == 1) {  // NCHW: vectorised
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
  }
}

}  // namespace

void conv2d_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  dispatch_floating(x.dtype(), "conv2d", [&](auto tag) { conv2d_forward_typed<decltype(tag)>(y, x, w, bias, p); });
}

void conv2d_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                     const Tensor& w, const Conv2dParams& p) {
  dispatch_floating(x.dtype(), "conv2d_backward",
                    [&](auto tag) { conv2d_backward_typed<decltype(tag)>(dx, dw, db, dy, x, w, p); });
}

void max_pool2d_forward(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  dispatch_floating(x.dtype(), "max_pool2d",
                    [&](auto tag) { max_pool2d_forward_typed<decltype(tag)>(y, indices, x, p); });
}

void max_pool2d_backward(const Tensor& dx, const Tensor& dy, const Tensor& indices, const Pool2dParams&) {
  dispatch_floating(dx.dtype(), "max_pool2d_backward",
                    [&](auto tag) { max_pool2d_backward_typed<decltype(tag)>(dx, dy, indices); });
}

void avg_pool2d_forward(const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  dispatch_floating(x.dtype(), "avg_pool2d", [&](auto tag) { avg_pool2d_typed<decltype(tag), false>(y, x, p); });
}

void avg_pool2d_backward(const Tensor& dx, const Tensor& dy, const Pool2dParams& p) {
  dispatch_floating(dx.dtype(), "avg_pool2d_backward",
                    [&](auto tag) { avg_pool2d_typed<decltype(tag), true>(dx, dy, p); });
}

void adaptive_avg_pool2d_forward(const Tensor& y, const Tensor& x) {
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d",
                    [&](auto tag) { adaptive_avg_pool2d_typed<decltype(tag), false>(y, x); });
}

void adaptive_avg_pool2d_backward(const Tensor& dx, const Tensor& dy) {
  dispatch_floating(dx.dtype(), "adaptive_avg_pool2d_backward",
                    [&](auto tag) { adaptive_avg_pool2d_typed<decltype(tag), true>(dx, dy); });
}

void batch_norm_forward(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        bool training, double momentum, double eps) {
  dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    batch_norm_forward_typed<decltype(tag)>(y, save_mean, save_invstd, x, weight, bias, running_mean, running_var,
                                            training, momentum, eps);
  });
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& weight, const Tensor& save_mean, const Tensor& save_invstd,
                         bool training) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&](auto tag) {
    batch_norm_backward_typed<decltype(tag)>(dx, dweight, dbias, dy, x, weight, save_mean, save_invstd, training);
  });
}

}  // namespace hg::cpu
