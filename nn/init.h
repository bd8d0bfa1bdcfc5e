// Parameter initialisation, in place and seeded (hg::default_generator() when
// no generator is given). fan_in/fan_out follow PyTorch: for a [out, in, ...]
// weight, fan_in = in * receptive field, fan_out = out * receptive field.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hg {
class Generator;
}

namespace hg::nn::init {

void uniform_(const Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// gain * sqrt(3 / fan_in) bound (a = leaky-relu slope; a = sqrt(5) gives
// PyTorch's nn.Linear default of 1/sqrt(fan_in)).
void kaiming_uniform_(const Tensor& t, double a = 0.0, Generator* gen = nullptr);
void kaiming_normal_(const Tensor& t, double a = 0.0, Generator* gen = nullptr);
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);

int64_t fan_in(const Tensor& t);
int64_t fan_out(const Tensor& t);

}  // namespace hg::nn::init
