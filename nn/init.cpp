#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "autograd/grad_mode.h"
#include "kernels/random/random.h"

namespace hg::nn::init {

namespace {
int64_t receptive_field(const Tensor& t) {
  int64_t r = 1;
  for (int64_t d = 2; d < t.dim(); ++d) r *= t.size(d);
  return r;
}
}  // namespace

int64_t fan_in(const Tensor& t) {
  HG_CHECK(t.dim() >= 1, "init: fan_in needs a tensor with at least 1 dim, got ", t.shape_str());
  return t.dim() == 1 ? t.size(0) : t.size(1) * receptive_field(t);
}

int64_t fan_out(const Tensor& t) {
  HG_CHECK(t.dim() >= 1, "init: fan_out needs a tensor with at least 1 dim, got ", t.shape_str());
  return t.size(0) * receptive_field(t);
}

void uniform_(const Tensor& t, double low, double high, Generator* gen) {
  NoGradGuard no_grad;
  ops::uniform_(t, low, high, gen);
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  NoGradGuard no_grad;
  ops::normal_(t, mean, std, gen);
}

void zeros_(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor target = t;
  target.zero_();
}

void ones_(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor target = t;
  target.fill_(1.0);
}

void kaiming_uniform_(const Tensor& t, double a, Generator* gen) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(std::max<int64_t>(fan_in(t), 1)));
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, double a, Generator* gen) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  normal_(t, 0.0, gain / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in(t), 1))), gen);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in(t) + fan_out(t), 1)));
  uniform_(t, -bound, bound, gen);
}

void xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(std::max<int64_t>(fan_in(t) + fan_out(t), 1))), gen);
}

}  // namespace hg::nn::init
