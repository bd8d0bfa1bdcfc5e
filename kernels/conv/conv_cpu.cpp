// CPU convolution: oneDNN's primitives where the dtype's path is on
// (kernels/conv/conv_onednn.cpp), else im2col/col2im over the GEMM, the
// fallback and the reference for the CUDA kernels (formulas in
// kernels/conv/conv.h; kernels/conv/CPU.md, "CPU convolution paths"). HG_CPU_CONV=im2col
// forces the im2col path. Every tensor is read and written through its
// strides, so NCHW and channels-last take the same code without a copy.
//
// im2col, per chunk of images and per group (S = float, double for f64):
//   col[Kg, nb*P]  = im2col(x)                  Kg = Cg*KH*KW, P = OH*OW
//   out[Og, nb*P]  = W_g[Og, Kg] @ col          (one GEMM per group and chunk)
//   dW_g          += dy_g[Og, nb*P] @ col^T
//   dcol[Kg, nb*P] = W_g^T @ dy_g,  d_x = col2im(dcol)
// Chunks keep col under kColLimit elements; the GEMMs run OpenBLAS's threads.
// Pooling and batch normalisation: kernels/conv/pool_norm_cpu.cpp.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/conv/conv.h"
#include "kernels/cpu/loops.h"
#include "kernels/conv/view4.h"
#include "kernels/gemm/gemm.h"

#if defined(HG_HAVE_ONEDNN)
#include "kernels/conv/conv_onednn.h"
#endif

namespace hg::cpu {

namespace {

constexpr int64_t kColLimit = int64_t{1} << 23;  // elements of one im2col buffer (32 MiB in f32)

std::atomic<int64_t> g_im2col_calls{0};
std::atomic<int64_t> g_onednn_calls{0};

template <typename S>
constexpr DType dtype_of_acc() {
  return std::is_same_v<S, double> ? kF64 : kF32;
}

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
  parallel_for(g.Kg, g.Kg * cols >= kParallelGrain, [&](int64_t r) {
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
  });
}

// dx_buf[n, c - grp*Cg, ih, iw] += dcol (dense [nb, Cg, H, W] per group).
template <typename S>
void col2im(const S* dcol, const ConvGeom& g, int64_t nb, S* dx_buf) {
  const int64_t cols = nb * g.P;
  parallel_for(g.Cg, g.Kg * cols >= kParallelGrain, [&](int64_t c) {
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
  });
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
      parallel_for(g.Og, g.Og * cols >= kParallelGrain, [&](int64_t o) {
        const int64_t oc = grp * g.Og + o;
        const S bo = b[static_cast<size_t>(oc)];
        for (int64_t n = 0; n < nb; ++n)
          for (int64_t i = 0; i < g.OH; ++i)
            for (int64_t j = 0; j < g.OW; ++j)
              yv.at(n0 + n, oc, i, j) =
                  static_cast<T>(out[static_cast<size_t>(o * cols + n * g.P + i * g.OW + j)] + bo);
      });
    }
  }
}

// d_b[o] = sum over n, i, j of d_y (double sums, one rounding).
template <typename T>
void bias_grad_typed(const Tensor& d_b, const Tensor& d_y) {
  const View4<const T> dyv(d_y);
  const int64_t N = d_y.size(0), O = d_y.size(1), OH = d_y.size(2), OW = d_y.size(3);
  T* dbp = static_cast<T*>(d_b.data_ptr());
  parallel_for(O, N * O * OH * OW >= kParallelGrain, [&](int64_t o) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) s += static_cast<double>(dyv.at(n, o, i, j));
    dbp[o * d_b.stride(0)] = static_cast<T>(s);
  });
}

template <typename T>
void conv2d_backward_typed(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y, const Tensor& x,
                           const Tensor& w, const Conv2dParams& prm) {
  using S = acc_t<T>;
  const ConvGeom g(x, w, d_y.size(2), d_y.size(3), prm);
  const View4<const T> xv(x), dyv(d_y);
  if (d_b.defined()) bias_grad_typed<T>(d_b, d_y);
  if (!d_x.defined() && !d_w.defined()) return;
  const std::vector<S> wd = dense_weight<S, T>(w, g);
  std::vector<S> dwd(d_w.defined() ? static_cast<size_t>(g.O * g.Kg) : 0, S(0));
  const int64_t nbmax = g.chunk();
  const std::unique_ptr<S[]> col(new S[static_cast<size_t>(g.Kg * nbmax * g.P)]);
  const std::unique_ptr<S[]> dyg(new S[static_cast<size_t>(g.Og * nbmax * g.P)]);
  std::vector<S> dxb(d_x.defined() ? static_cast<size_t>(nbmax * g.Cg * g.H * g.W) : 0);
  const View4<T> dxv = d_x.defined() ? View4<T>(d_x) : View4<T>(d_y);
  bool first_chunk = true;
  for (int64_t n0 = 0; n0 < g.N; n0 += nbmax) {
    const int64_t nb = std::min(nbmax, g.N - n0), cols = nb * g.P;
    for (int64_t grp = 0; grp < g.G; ++grp) {
      parallel_for(g.Og, g.Og * cols >= kParallelGrain, [&](int64_t o) {
        for (int64_t n = 0; n < nb; ++n)
          for (int64_t i = 0; i < g.OH; ++i)
            for (int64_t j = 0; j < g.OW; ++j)
              dyg[static_cast<size_t>(o * cols + n * g.P + i * g.OW + j)] =
                  static_cast<S>(dyv.at(n0 + n, grp * g.Og + o, i, j));
      });
      if (d_w.defined()) {
        im2col<S, T>(xv, g, grp, n0, nb, col.get());
        gemm_acc<S, T>(false, true, g.Og, g.Kg, cols, dyg.get(), cols, col.get(), cols, dwd.data() + grp * g.Og * g.Kg,
                       g.Kg, first_chunk ? 0.0f : 1.0f);
      }
      if (d_x.defined()) {
        // dcol reuses col (im2col of this group is no longer needed).
        gemm_acc<S, T>(true, false, g.Kg, cols, g.Og, wd.data() + grp * g.Og * g.Kg, g.Kg, dyg.get(), cols, col.get(),
                       cols, 0.0f);
        std::fill(dxb.begin(), dxb.begin() + nb * g.Cg * g.H * g.W, S(0));
        col2im<S>(col.get(), g, nb, dxb.data());
        parallel_for(g.Cg, nb * g.Cg * g.H * g.W >= kParallelGrain, [&](int64_t c) {
          for (int64_t n = 0; n < nb; ++n)
            for (int64_t h = 0; h < g.H; ++h)
              for (int64_t ww = 0; ww < g.W; ++ww)
                dxv.at(n0 + n, grp * g.Cg + c, h, ww) =
                    static_cast<T>(dxb[static_cast<size_t>(((n * g.Cg + c) * g.H + h) * g.W + ww)]);
        });
      }
    }
    first_chunk = false;
  }
  if (d_w.defined()) {
    const View4<T> dwv(d_w);
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t kh = 0; kh < g.KH; ++kh)
          for (int64_t kw = 0; kw < g.KW; ++kw)
            dwv.at(o, c, kh, kw) = static_cast<T>(dwd[static_cast<size_t>(o * g.Kg + (c * g.KH + kh) * g.KW + kw)]);
  }
}

}  // namespace

void conv2d_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
#if defined(HG_HAVE_ONEDNN)
  if (conv2d_forward_onednn(y, x, w, bias, p)) {
    g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
#endif
  g_im2col_calls.fetch_add(1, std::memory_order_relaxed);
  dispatch_floating(x.dtype(), "conv2d", [&](auto tag) { conv2d_forward_typed<decltype(tag)>(y, x, w, bias, p); });
}

void conv2d_backward(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y, const Tensor& x,
                     const Tensor& w, const Conv2dParams& p) {
#if defined(HG_HAVE_ONEDNN)
  if (conv2d_backward_onednn(d_x, d_w, d_b, d_y, x, w, p)) {
    g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
    if (d_b.defined() && !d_w.defined()) {  // oneDNN fuses the bias gradient into backward-weights only
      dispatch_floating(x.dtype(), "conv2d_backward", [&](auto tag) { bias_grad_typed<decltype(tag)>(d_b, d_y); });
    }
    return;
  }
#endif
  g_im2col_calls.fetch_add(1, std::memory_order_relaxed);
  dispatch_floating(x.dtype(), "conv2d_backward",
                    [&](auto tag) { conv2d_backward_typed<decltype(tag)>(d_x, d_w, d_b, d_y, x, w, p); });
}

const char* conv_im2col_reason(DType dtype) {
#if defined(HG_HAVE_ONEDNN)
  return conv_onednn_off_reason(dtype);
#else
  (void)dtype;
  return "this build has no oneDNN";
#endif
}

const char* conv_path(DType dtype) { return *conv_im2col_reason(dtype) == '\0' ? "onednn" : "im2col"; }

ConvCounts conv_counts() {
  ConvCounts c;
  c.im2col = g_im2col_calls.load();
#if defined(HG_HAVE_ONEDNN)
  c.onednn = g_onednn_calls.load();
  c.reorders = conv_onednn_reorders();
#endif
  return c;
}

}  // namespace hg::cpu
