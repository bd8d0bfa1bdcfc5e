#include "nn/conv.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"

namespace hg::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& options,
               bool with_bias, Generator* gen)
    : Conv2d(in_channels, out_channels, {kernel_size, kernel_size}, options, with_bias, gen) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size,
               const Conv2dOptions& options, bool with_bias, Generator* gen)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), options_(options) {
  HG_CHECK(in_channels > 0 && out_channels > 0 && kernel_size[0] > 0 && kernel_size[1] > 0 && options.groups > 0,
           "Conv2d: channels, kernel size and groups must be > 0, got in ", in_channels, " out ", out_channels,
           " kernel (", kernel_size[0], ", ", kernel_size[1], ") groups ", options.groups);
  HG_CHECK(in_channels % options.groups == 0 && out_channels % options.groups == 0, "Conv2d: groups=", options.groups,
           " must divide in_channels=", in_channels, " and out_channels=", out_channels);
  weight =
      register_parameter("weight", empty({out_channels, in_channels / options.groups, kernel_size[0], kernel_size[1]}));
  init::kaiming_uniform_(weight, std::sqrt(5.0), gen);
  if (with_bias) {
    bias = register_parameter("bias", empty({out_channels}));
    const double fan_in = static_cast<double>(in_channels / options.groups * kernel_size[0] * kernel_size[1]);
    init::uniform_(bias, -1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in), gen);
  }
}

Tensor Conv2d::forward(const Tensor& x) { return hg::conv2d(x, weight, bias, options_); }

std::string Conv2d::type_name() const {
  std::ostringstream os;
  os << "Conv2d(" << in_ << ", " << out_ << ", kernel_size=(" << kernel_[0] << ", " << kernel_[1] << "), stride=("
     << options_.stride[0] << ", " << options_.stride[1] << ")";
  if (options_.padding_same) {
    os << ", padding=same";
  } else {
    os << ", padding=(" << options_.padding[0] << ", " << options_.padding[1] << ")";
  }
  if (options_.dilation != std::array<int64_t, 2>{1, 1})
    os << ", dilation=(" << options_.dilation[0] << ", " << options_.dilation[1] << ")";
  if (options_.groups != 1) os << ", groups=" << options_.groups;
  os << ", bias=" << (bias.defined() ? "true" : "false") << ")";
  return os.str();
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine)
    : features_(num_features), eps_(eps), momentum_(momentum) {
  HG_CHECK(num_features > 0, "BatchNorm2d: num_features must be > 0, got ", num_features);
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  running_mean = register_buffer("running_mean", zeros({num_features}));
  running_var = register_buffer("running_var", ones({num_features}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = kI64}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  HG_CHECK(x.dim() == 4 && x.size(1) == features_, "BatchNorm2d(", features_, "): input must be [N, ", features_,
           ", H, W], got ", x.shape_str(), "; check the channels of the layer before");
  if (is_training()) {
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked.to(kF64) + 1.0);
  }
  return hg::batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum_, eps_);
}

std::string BatchNorm2d::type_name() const {
  std::ostringstream os;
  os << "BatchNorm2d(" << features_ << ", eps=" << eps_ << ", momentum=" << momentum_ << ")";
  return os.str();
}

Tensor MaxPool2d::forward(const Tensor& x) { return hg::max_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_}, {d_, d_}, ceil_); }

Tensor AvgPool2d::forward(const Tensor& x) {
  return hg::avg_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_}, ceil_, include_pad_);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return hg::adaptive_avg_pool2d(x, out_); }

Tensor Unflatten::forward(const Tensor& x) {
  HG_CHECK(x.dim() >= 2, "Unflatten: input must have a dim 1, got ", x.shape_str());
  Shape s{x.size(0)};
  s.insert(s.end(), shape_.begin(), shape_.end());
  for (int64_t d = 2; d < x.dim(); ++d) s.push_back(x.size(d));
  return hg::reshape(x, s);
}

}  // namespace hg::nn
