// gradcheck: analytic gradients against central finite differences in f64.
//
//   auto report = hg::gradcheck([](const std::vector<Tensor>& in) { return hg::tanh(in[0]); },
//                               {hg::randn({3, 4}, {.dtype = hg::kF64})});
//   // report is empty when every gradient matches
//
// The output y is projected onto fixed random weights v (L = sum(y * v)), so
// one backward pass gives dL/dx for every input element; each element is then
// perturbed by +-eps and (L+ - L-) / (2 eps) compared with it:
// |analytic - numeric| <= atol + rtol * |numeric|.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hg {

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-3;
  double atol = 1e-5;
  uint64_t seed = 1234;  // for the projection weights v
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): GradcheckOptions{}.set_seed(...).set_eps(...).
  // clang-format off
  constexpr GradcheckOptions& set_eps(double v) { eps = v; return *this; }
  constexpr GradcheckOptions& set_rtol(double v) { rtol = v; return *this; }
  constexpr GradcheckOptions& set_atol(double v) { atol = v; return *this; }
  constexpr GradcheckOptions& set_seed(uint64_t v) { seed = v; return *this; }
  // clang-format on
};

// Inputs must be f64 CPU tensors; those with requires_grad() are checked.
// Returns "" on success, else a report naming the input, element and values.
std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                      const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace hg
