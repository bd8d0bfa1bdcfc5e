#include "nn/functional.h"

#include "kernels/ops.h"
#include "kernels/random/random.h"
#include "kernels/reduce/reduce.h"

namespace hg::nn::functional {

double accuracy(const Tensor& logits, const Tensor& targets) {
  HG_CHECK(logits.defined() && logits.dim() >= 1, "accuracy: logits must have a class dim, got ",
           logits.defined() ? logits.shape_str() : "an undefined tensor");
  Shape rows(logits.sizes().begin(), logits.sizes().end() - 1);
  HG_CHECK(targets.defined() && targets.dtype() == kI64 && targets.sizes() == rows, "accuracy: targets must be i64 ",
           shape_to_string(rows), " (one class per row of logits ", logits.shape_str(), ")");
  if (targets.numel() == 0) return 0.0;
  const Tensor hits = ops::binary(OpId::eq, ops::argmax(logits.detach(), -1), targets.to(logits.device()));
  return ops::reduce(OpId::sum, hits.to(kF64), {}, false).item<double>() / static_cast<double>(targets.numel());
}

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
