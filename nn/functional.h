// hg::nn::functional — stateless layer functions (torch.nn.functional).
#pragma once

#include <cstdint>
#include <optional>

#include "autograd/functions.h"

namespace hg {
class Generator;
}

namespace hg::nn::functional {

inline Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor()) { return hg::linear(x, w, b); }
inline Tensor relu(const Tensor& x) { return hg::relu(x); }
inline Tensor gelu(const Tensor& x, bool tanh_approx = false) { return hg::gelu(x, tanh_approx); }
inline Tensor silu(const Tensor& x) { return hg::silu(x); }
inline Tensor softmax(const Tensor& x) { return hg::softmax(x); }
inline Tensor log_softmax(const Tensor& x) { return hg::log_softmax(x); }
inline Tensor softmax(const Tensor& x, int64_t dim) { return hg::softmax(x, dim); }
inline Tensor log_softmax(const Tensor& x, int64_t dim) { return hg::log_softmax(x, dim); }
inline Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                         const Tensor& bias = Tensor(), double eps = 1e-5) {
  return hg::layer_norm(x, normalized_shape, weight, bias, eps);
}
inline Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                       std::optional<double> eps = std::nullopt) {
  return hg::rms_norm(x, normalized_shape, weight, eps);
}
inline Tensor embedding(const Tensor& indices, const Tensor& weight,
                        std::optional<int64_t> padding_idx = std::nullopt) {
  return hg::embedding(indices, weight, padding_idx);
}
inline Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                            double label_smoothing = 0.0, int64_t classes = 0) {
  return hg::cross_entropy(logits, targets, ignore_index, label_smoothing, classes);
}
// torch.nn.functional.scaled_dot_product_attention (autograd/functions_attention.h).
inline Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const SdpaOptions& options = {}) {
  return hg::scaled_dot_product_attention(q, k, v, options);
}
// The fraction of rows whose argmax over the last dim equals the i64 target
// (torchmetrics' multiclass accuracy, micro average); not differentiable.
// logits [..., C], targets [...]; a double in [0, 1] (reads the device).
double accuracy(const Tensor& logits, const Tensor& targets);
// mean((input - target)^2), computed in fp32 for 16-bit inputs.
Tensor mse_loss(const Tensor& input, const Tensor& target);
// Zeroes each element with probability p and scales the rest by 1/(1-p) when
// training; the mask comes from Philox, so it is the same on CPU and CUDA.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace hg::nn::functional
