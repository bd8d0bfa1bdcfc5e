// The fp8 recipe's state and casts (Note [fp8 recipe] in amp/fp8.h).
#include "amp/fp8.h"

#include <cstdint>
#include <vector>

namespace hg::amp {

Fp8State::Fp8State(int64_t layers, const Fp8Recipe& recipe, Device device) : layers_(layers), recipe_(recipe) {
  HG_CHECK(layers >= 0, "Fp8State: layers must be >= 0, got ", layers);
  HG_CHECK(recipe.amax_history_len >= 1, "Fp8State: amax_history_len must be >= 1, got ", recipe.amax_history_len);
  HG_CHECK(recipe.margin >= 0 && recipe.margin < 64, "Fp8State: margin must be in [0, 64), got ", recipe.margin);
  const int64_t n = 3 * layers;
  const int64_t length = recipe.scaling == Fp8Scaling::delayed ? recipe.amax_history_len : 1;
  history_ = zeros({length, n}, {.device = device});
  scale_ = ones({n}, {.device = device});
  scale_inv_ = ones({n}, {.device = device});
  std::vector<float> max_finite(static_cast<size_t>(n));
  for (int64_t l = 0; l < layers; ++l) {
    for (const Fp8Role role : {Fp8Role::input, Fp8Role::weight, Fp8Role::grad_output}) {
      max_finite[static_cast<size_t>(slot(l, role))] = fp8_max(dtype(role));
    }
  }
  fp8_max_ = from_vector(max_finite).to(device);
}

DType Fp8State::dtype(Fp8Role role) const {
  return recipe_.format == Fp8Format::hybrid && role == Fp8Role::grad_output ? kF8E5M2 : kF8E4M3;
}

int64_t Fp8State::slot(int64_t layer, Fp8Role role) const {
  HG_CHECK(layer >= 0 && layer < layers_, "Fp8State: layer ", layer, " is outside [0, ", layers_, ")");
  return 3 * layer + static_cast<int64_t>(role);
}

Tensor Fp8State::scale(int64_t layer, Fp8Role role) const { return scale_.narrow(0, slot(layer, role), 1); }
Tensor Fp8State::scale_inv(int64_t layer, Fp8Role role) const { return scale_inv_.narrow(0, slot(layer, role), 1); }
Tensor Fp8State::amax(int64_t layer, Fp8Role role) const {
  return history_.select(0, 0).narrow(0, slot(layer, role), 1);
}

Tensor Fp8State::cast(const Tensor& x, int64_t layer, Fp8Role role) {
  const Tensor amax_slot = amax(layer, role);
  if (recipe_.scaling == Fp8Scaling::current) {
    // This tensor's amax, then the scales from it (the history has one row;
    // the other slots' rows are 0, which keeps their scales), then the cast.
    ops::fp8_amax(x, amax_slot);
    ops::fp8_update_scales_(history_, scale_, scale_inv_, fp8_max_, Tensor(), recipe_.margin,
                            Fp8AmaxCompute::kMostRecent);
  }
  return ops::fp8_cast(x, dtype(role), scale(layer, role), amax_slot);
}

void Fp8State::update(const Tensor& found_inf) {
  if (recipe_.scaling != Fp8Scaling::delayed || layers_ == 0) return;
  ops::fp8_update_scales_(history_, scale_, scale_inv_, fp8_max_, found_inf, recipe_.margin, recipe_.amax_compute);
}

Tensor fp8_linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                          DType out_dtype) {
  HG_CHECK(x.defined() && weight.defined() && x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
           "fp8_linear_forward: x [*, K] and weight [N, K] needed, got ", x.shape_str(), " and ", weight.shape_str());
  Shape out_shape = x.sizes();
  out_shape.back() = weight.size(0);
  const Tensor x2 = x.reshape({-1, x.size(-1)});
  const Tensor qx = state.cast(x2, layer, Fp8Role::input);
  const Tensor qw = state.cast(weight, layer, Fp8Role::weight);
  const Tensor b = bias.defined() ? bias.to(out_dtype == kF16 ? kF16 : kBF16) : Tensor();
  return ops::fp8_linear(qx, qw, state.scale_inv(layer, Fp8Role::input), state.scale_inv(layer, Fp8Role::weight),
                         out_dtype, b)
      .view(out_shape);
}

}  // namespace hg::amp
