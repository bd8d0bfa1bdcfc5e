// Differentiable convolution, pooling and batch normalisation (kernels/conv/conv.h
// has the formulas, layouts and precision contract). Like torch.nn.functional:
//
//   Tensor y = hg::conv2d(x, w, b, {.stride = {2, 2}, .padding = {1, 1}});
//   Tensor z = hg::max_pool2d(y, {2, 2});
//   Tensor n = hg::batch_norm(z, running_mean, running_var, gamma, beta, /*training=*/true);
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace hg {

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};  // ignored when padding_same
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool padding_same = false;  // padding="same" (stride 1 only, as torch)
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): Conv2dOptions{}.set_padding_same(...).set_stride(...).
  // clang-format off
  constexpr Conv2dOptions& set_stride(std::array<int64_t, 2> v) { stride = v; return *this; }
  constexpr Conv2dOptions& set_padding(std::array<int64_t, 2> v) { padding = v; return *this; }
  constexpr Conv2dOptions& set_dilation(std::array<int64_t, 2> v) { dilation = v; return *this; }
  constexpr Conv2dOptions& set_groups(int64_t v) { groups = v; return *this; }
  constexpr Conv2dOptions& set_padding_same(bool v) { padding_same = v; return *this; }
  constexpr Conv2dOptions& set_stride(int64_t s) { stride = {s, s}; return *this; }
  constexpr Conv2dOptions& set_padding(int64_t p) { padding = {p, p}; return *this; }
  constexpr Conv2dOptions& set_dilation(int64_t d) { dilation = {d, d}; return *this; }
  // clang-format on
};

// x [N, C, H, W], weight [O, C/groups, KH, KW], bias [O] or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Conv2dOptions& options = {});

// stride {0, 0} = the kernel size (torch's default stride=None).
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);

// torch.nn.functional.batch_norm's argument order. Training updates the
// running statistics in place (when given) and normalises by the batch's;
// eval normalises by the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace hg
