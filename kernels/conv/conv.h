// Convolution, pooling and batch normalisation over 4-D NCHW tensors
// (kernels/conv/README.md, "Convolution", "Pooling", "Batch normalisation").
//
//   Tensor y = hg::ops::conv2d(x /*[N,C,H,W]*/, w /*[O,C/g,KH,KW]*/, bias /*[O] or {}*/, params);
//   auto [d_x, d_w, d_b] = hg::ops::conv2d_backward(d_y, x, w, params, {true, true, true});
//   auto [y, idx] = hg::ops::max_pool2d(x, pool);   Tensor d_x = hg::ops::max_pool2d_backward(d_y, x, idx, pool);
//   auto bn = hg::ops::batch_norm(x, w, b, running_mean, running_var, training, momentum, eps);
//
// Layouts: every input may have any strides; NCHW (contiguous) and
// channels-last (NHWC strides, PyTorch's memory_format=channels_last) are the
// two that matter. Outputs take the input's layout: a channels-last x gives a
// channels-last y (and d_x), without a copy of x.
//
// Formulas (PyTorch's, with p_lo/p_hi the padding before/after, s stride,
// d dilation, g groups, Cg = C/g, Og = O/g):
//   conv2d:  y[n,o,i,j] = b[o] + sum_{c<Cg,kh,kw} x[n, (o/Og)*Cg + c, i*s - p_lo + kh*d, j*s - p_lo + kw*d]
//                                                  * w[o, c, kh, kw]          (x = 0 outside)
//            OH = (H + p_lo + p_hi - d*(KH-1) - 1) / s + 1
//   max_pool2d: y = max over the dilated window (padding is -inf); idx = the
//            flat h*W+w of the first maximum (ties: first in row-major window
//            order; NaN wins), as PyTorch; backward adds d_y at idx.
//   avg_pool2d: y = sum of the window / (count_include_pad ? window clipped to
//            the padded input : window clipped to the input).
//   adaptive_avg_pool2d: window i = [floor(i*H/OH), ceil((i+1)*H/OH)).
//   batch_norm (per channel c over n, h, w; m = N*H*W):
//            training: mean, var = biased batch statistics, y = (x-mean)*rstd*w + b,
//                      rstd = 1/sqrt(var+eps); running_mean = (1-momentum)*rm + momentum*mean,
//                      running_var = (1-momentum)*rv + momentum*var*m/(m-1)
//            eval:     mean = running_mean, rstd = 1/sqrt(running_var + eps)
//            backward (training): d_x = w*rstd/m * (m*d_y - sum(d_y) - xhat*sum(d_y*xhat))
//            backward (eval):     d_x = d_y*w*rstd;  both: d_w = sum(d_y*xhat), d_b = sum(d_y)
//
// Precision contract: f16/bf16 tensors are widened to fp32 (or, on the CPU's
// oneDNN bf16 convolution, multiplied as bf16: each product is exact in
// fp32), every sum runs in fp32 (the CPU's im2col path sums in double where
// cheap: BN statistics, bias gradients), one rounding on store; f64 is f64
// throughout (gradcheck).
// batch_norm takes 16-bit x with f32 weight, bias and running statistics (the
// autocast contract) or all in one dtype; its saved mean/rstd are f32 (f64
// for f64 x).
#pragma once

#include <array>
#include <cstdint>
#include <tuple>

#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg {

// The resolved geometry of a convolution (padding "same" already turned into
// numbers; p_lo and p_hi differ only for "same" with an even dilated kernel).
struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0};
  std::array<int64_t, 2> pad_hi{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dParams {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

// Output extent of one spatial dim of a pooling window (PyTorch's rule:
// ceil_mode drops a last window that would start in the right padding).
int64_t pool_output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

// True when t ([N,C,H,W]) has channels-last strides and is not plain contiguous.
bool is_channels_last(const Tensor& t);

}  // namespace hg

namespace hg::ops {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
// Gradients wanted: {d_x, d_w, d_b}; the ones not wanted come back undefined.
std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& d_y, const Tensor& x, const Tensor& w,
                                                   const Conv2dParams& p, std::array<bool, 3> need);

// (y, indices i64 with y's shape)
std::tuple<Tensor, Tensor> max_pool2d(const Tensor& x, const Pool2dParams& p);
// p: the forward's params (the CUDA kernel gathers over the windows holding each d_x element).
Tensor max_pool2d_backward(const Tensor& d_y, const Tensor& x, const Tensor& indices, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& d_y, const Tensor& x, const Pool2dParams& p);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& d_y, const Tensor& x);

struct BatchNormResult {
  Tensor y;
  Tensor save_mean;  // [C] f32 (f64 for f64 x): batch mean (training) or running mean (eval)
  Tensor save_rstd;  // [C] 1/sqrt(var + eps) of the statistics used
};
// running_mean/var may be undefined (then training must be true: batch
// statistics always, as track_running_stats=False); when given and training,
// they are updated in place.
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps);
// {d_x, d_weight, d_bias}; d_weight/d_bias in weight's dtype, undefined when weight is.
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& weight,
                                                       const Tensor& save_mean, const Tensor& save_rstd, bool training,
                                                       std::array<bool, 3> need);

}  // namespace hg::ops

// The backend kernels. Preconditions (kernels/conv/conv_ops.cpp): every tensor on
// one device; x, y, d_y, d_x 4-D with any strides, sharing one dtype; w [O,Cg,KH,KW]
// and bias [O] in x's dtype; outputs allocated with their final shapes;
// indices i64 shaped like y. BN: weight/bias (may be undefined) and running
// stats contiguous [C] in the accumulation dtype (f32, f64 for f64 x);
// save_mean/save_rstd/d_weight/d_bias contiguous [C] in that dtype.
// clang-format off
#define HG_DECLARE_CONV_KERNELS                                                                        \
  void conv2d_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,            \
                      const Conv2dParams& p);                                                          \
  /* d_x, d_w, d_b: undefined = not wanted */                                                             \
  void conv2d_backward(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y,          \
                       const Tensor& x, const Tensor& w, const Conv2dParams& p);                       \
  void max_pool2d_forward(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dParams& p); \
  void max_pool2d_backward(const Tensor& d_x, const Tensor& d_y, const Tensor& indices,                  \
                           const Pool2dParams& p);                                                     \
  void avg_pool2d_forward(const Tensor& y, const Tensor& x, const Pool2dParams& p);                    \
  void avg_pool2d_backward(const Tensor& d_x, const Tensor& d_y, const Pool2dParams& p);                 \
  void adaptive_avg_pool2d_forward(const Tensor& y, const Tensor& x);                                  \
  void adaptive_avg_pool2d_backward(const Tensor& d_x, const Tensor& d_y);                               \
  void batch_norm_forward(const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd,         \
                          const Tensor& x, const Tensor& weight, const Tensor& bias,                   \
                          const Tensor& running_mean, const Tensor& running_var, bool training,        \
                          double momentum, double eps);                                                \
  void batch_norm_backward(const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias,               \
                           const Tensor& d_y, const Tensor& x, const Tensor& weight,                    \
                           const Tensor& save_mean, const Tensor& save_rstd, bool training);
// clang-format on

namespace hg::cpu {
HG_DECLARE_CONV_KERNELS

// The path CPU convolutions of this dtype take in this process
// (kernels/conv/CPU.md, "CPU convolution paths"): "onednn" (oneDNN's convolution
// primitives) or "im2col" (im2col + GEMM, the fallback and the reference). A
// shape oneDNN has no non-reference kernel for takes im2col either way.
// HG_CPU_CONV=im2col|onednn|auto (read once) chooses; auto takes oneDNN for
// f32 on AVX-512 CPUs and bf16 on AVX512_BF16/AMX CPUs.
const char* conv_path(DType dtype);
// Why "im2col" ("" when "onednn"): HG_CPU_CONV=im2col, HG_CPU_ISA=generic, the
// CPU, the dtype, or a build without oneDNN.
const char* conv_im2col_reason(DType dtype);
// Process-wide counts since start: convolution calls (forward or backward)
// that ran on oneDNN and on im2col, and the layout reorders executed around
// the oneDNN primitives.
struct ConvCounts {
  int64_t onednn = 0;
  int64_t im2col = 0;
  int64_t reorders = 0;
};
ConvCounts conv_counts();
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_CONV_KERNELS
}  // namespace hg::cuda
#endif
