#include "nn/functional.h"

#include "kernels/random.h"

namespace hg::nn::functional {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  HG_CHECK(input.sizes() == target.sizes(), "mse_loss: input shape ", input.shape_str(),
           " differs from target shape ", target.shape_str());
  const Tensor a = is_16bit_float(input.dtype()) ? hg::to(input, kF32) : input;
  const Tensor b = is_16bit_float(target.dtype()) ? hg::to(target, kF32) : target;
  const Tensor diff = a - b;
  return hg::mean(diff * diff);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  HG_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  Tensor keep = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  ops::bernoulli_(keep, 1.0 - p, gen);
  return x * hg::mul(keep, 1.0 / (1.0 - p));
}

}  // namespace hg::nn::functional
