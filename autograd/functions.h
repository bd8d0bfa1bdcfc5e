// The differentiable op API: hg::exp(x), hg::matmul(a, b), a + b, ...
//
// Each function computes its result with the kernel API (kernels/ops.h and
// friends) and, when grad mode is on and an input requires grad, records a
// node whose backward is written next to the forward in functions*.cpp and
// captures only what it needs. Broadcasting is undone in the backward by
// summing over the broadcast dims (sum_to). Comparisons, argmax and other
// integer-valued ops are not differentiable and are used from hg::ops.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace hg {

// ---- elementwise ------------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approx = false);
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
// To an integer value, in x's dtype: round (half to even, like torch.round),
// floor, trunc (toward zero). The gradient is zero (torch's rule); integer
// tensors come back unchanged.
Tensor round(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor trunc(const Tensor& x);
// min(max(x, min), max); either bound may be left out (not both), like
// torch.clamp. The gradient flows where min <= x <= max.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);
// log(1 + exp(beta x)) / beta, and x where beta x > threshold
// (torch.nn.functional.softplus).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor pow(const Tensor& x, double exponent);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // ties split the gradient evenly
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (fp32 accumulation) -------------------------------------------------------
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Gradient flows to every element equal to the max (split evenly on ties).
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor norm(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// ---- GEMM -----------------------------------------------------------------------------------
// torch.matmul: 2-D @ 2-D; batched operands of any rank with broadcast batch
// dims ([B,H,T,D] @ [B,H,D,T], [B,1,T,D] @ [H,D,T]) through strided-batched
// GEMMs (transposed views are not copied: kernels/gemm/gemm.h); 1-D operands as
// vectors (the vector's dim is dropped from the result).
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.bmm: a [B, M, K] @ b [B, K, N] -> [B, M, N]; no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// x @ weight^T + bias, weight [out, in] (like torch.nn.functional.linear).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- softmax family (last dim) --------------------------------------------------------------
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
// Mean over non-ignored rows; f32 scalar; logits [N, C], targets [N] i64.
// Floating targets of shape [N, C] are probabilities (soft labels, as torch):
// mean of -sum_c t_c log_softmax(x)_c, label_smoothing applied to t;
// ignore_index does not apply.
// classes: only the first `classes` columns are classes (0 = all); the rest
// are padding, outside the softmax, with gradient 0 (kernels/softmax/softmax.h).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, int64_t classes = 0);

// ---- differentiable views and conversions ---------------------------------------------------
Tensor view(const Tensor& x, Shape shape);
Tensor reshape(const Tensor& x, Shape shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, Shape shape);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor contiguous(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, Device device);

// Sums `grad` over the dims that broadcasting expanded to reach it from `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- softmax over any dim, norms (functions_norm.cpp), embedding and indexing (functions_index.cpp) ----
// softmax / log_softmax over any dim (the one-argument forms above use the last).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// torch.nn.functional.layer_norm / rms_norm over the trailing normalized_shape
// (kernels/norm/norm.h); weight and bias may be undefined. rms_norm's eps defaults
// to the machine epsilon of x's dtype, as torch's.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// Gated linear units over x halved along dim into a | b (kernels/glu/glu.h):
// glu = a * sigmoid(b) (torch.nn.functional.glu), swiglu = silu(a) * b.
Tensor glu(const Tensor& x, int64_t dim = -1);
Tensor swiglu(const Tensor& x, int64_t dim = -1);
// torch.nn.functional.embedding(indices, weight, padding_idx): rows of weight
// [V, C] at the (i64/i32) indices; the row at padding_idx gets no gradient. The
// backward is deterministic (kernels/index/index.h).
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of x along dim (the last one shorter when the size does not divide),
// like torch.split / torch.chunk; one gradient buffer (Note [Split backward]).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// mask ? value : x, mask bool broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- operators --------------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
inline Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }

}  // namespace hg

#include "autograd/functions_conv.h"       // conv2d, pooling, batch_norm
#include "autograd/functions_attention.h"  // scaled_dot_product_attention
