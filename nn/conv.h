// Convolutional layers: Conv2d, BatchNorm2d, MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d and Unflatten, with PyTorch's defaults and init.
//
//   auto net = std::make_shared<hg::nn::Sequential>(std::initializer_list<std::shared_ptr<hg::nn::Module>>{
//       std::make_shared<hg::nn::Conv2d>(1, 32, 3, hg::Conv2dOptions{.padding = {1, 1}}),
//       std::make_shared<hg::nn::BatchNorm2d>(32), std::make_shared<hg::nn::ReLU>(),
//       std::make_shared<hg::nn::MaxPool2d>(2)});
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "autograd/functions_conv.h"
#include "nn/module.h"

namespace hg {
class Generator;
}

namespace hg::nn {

// weight [out, in/groups, k, k], bias [out]; both U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// with fan_in = in/groups * KH * KW (torch's kaiming_uniform_(a=sqrt(5))).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& options = {},
         bool bias = true, Generator* gen = nullptr);
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size,
         const Conv2dOptions& options = {}, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

  Tensor weight;
  Tensor bias;

 private:
  int64_t in_, out_;
  std::array<int64_t, 2> kernel_;
  Conv2dOptions options_;
};

// Per-channel normalisation of [N, C, H, W]: weight = 1, bias = 0 (affine),
// buffers running_mean = 0, running_var = 1, num_batches_tracked (i64), as torch.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

  Tensor weight, bias;               // [C] (undefined when !affine)
  Tensor running_mean, running_var;  // [C] buffers
  Tensor num_batches_tracked;        // [] i64 buffer

 private:
  int64_t features_;
  double eps_, momentum_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, int64_t dilation = 1,
                     bool ceil_mode = false)
      : k_(kernel_size), s_(stride), p_(padding), d_(dilation), ceil_(ceil_mode) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }

 private:
  int64_t k_, s_, p_, d_;
  bool ceil_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true)
      : k_(kernel_size), s_(stride), p_(padding), ceil_(ceil_mode), include_pad_(count_include_pad) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  int64_t k_, s_, p_;
  bool ceil_, include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : out_(output_size) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }

 private:
  std::array<int64_t, 2> out_;
};

// Reshapes dim 1 of [N, F] into `shape` (torch.nn.Unflatten(1, shape)).
class Unflatten : public Module {
 public:
  explicit Unflatten(Shape shape) : shape_(std::move(shape)) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }

 private:
  Shape shape_;
};

}  // namespace hg::nn
