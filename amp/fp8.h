// The fp8 recipe: how tensors are scaled into E4M3/E5M2, with the scaling
// state of every fp8 layer in device tensors.
//
//   hg::amp::Fp8State fp8(/*layers=*/2, {.format = Fp8Format::hybrid}, device);
//   for (...) {
//     y = hg::amp::fp8_linear_forward(x, w, b, fp8, /*layer=*/0, hg::kBF16);
//     ...
//     scaler.step(opt);
//     fp8.update(scaler.found_any_tensor());  // one launch; a no-op on an overflow step
//     scaler.update();
//   }
//
// Note [fp8 recipe]
// Slots: each fp8 layer has three scaled tensors, its input (slot 3l), its
// weight (3l + 1) and its output gradient (3l + 2). Formats: Fp8Format::e4m3
// uses E4M3 for all three; Fp8Format::hybrid (Transformer Engine's default)
// E4M3 for inputs and weights and E5M2 (more range, less precision) for the
// gradients. Scaling:
//   delayed (Transformer Engine's DelayedScaling): a cast multiplies by the
//     slot's current scale and records the tensor's amax in row 0 of the
//     slot's amax history; update() (once per step, after the optimizer
//     step) derives the next scales from the history (Note [fp8 delayed
//     scaling] in kernels/fp8.h: scale = fp8_max / amax / 2^margin over the
//     history's max or its newest entry) and rolls it. One launch for all
//     slots, no host read; with the GradScaler's found_inf set, nothing
//     changes (the step is skipped like the optimizer's).
//   current: each cast first measures the tensor's amax and derives the
//     scale from it (history length 1), then casts: one more pass over the
//     tensor, no stale scales; update() is not needed.
// State (f32, on the device): history [L, 3 layers], scale, scale_inv and
// fp8_max [3 layers]; the scales start at 1.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/fp8.h"

namespace hg::amp {

enum class Fp8Format : uint8_t { e4m3, hybrid };
enum class Fp8Scaling : uint8_t { delayed, current };
enum class Fp8Role : int { input = 0, weight = 1, grad_output = 2 };

struct Fp8Recipe {
  Fp8Format format = Fp8Format::hybrid;
  Fp8Scaling scaling = Fp8Scaling::delayed;
  int64_t amax_history_len = 1024;  // delayed only
  int margin = 0;
  Fp8AmaxCompute amax_compute = Fp8AmaxCompute::kMax;
};

class Fp8State {
 public:
  Fp8State(int64_t layers, const Fp8Recipe& recipe, Device device);

  int64_t layers() const { return layers_; }
  const Fp8Recipe& recipe() const { return recipe_; }
  // The fp8 dtype of a role under this recipe.
  DType dtype(Fp8Role role) const;
  int64_t slot(int64_t layer, Fp8Role role) const;

  // Views of one slot's state ([1] each; amax is the history's row 0).
  Tensor scale(int64_t layer, Fp8Role role) const;
  Tensor scale_inv(int64_t layer, Fp8Role role) const;
  Tensor amax(int64_t layer, Fp8Role role) const;

  // x cast to the role's format with the slot's scale (Note [fp8 recipe]).
  Tensor cast(const Tensor& x, int64_t layer, Fp8Role role);
  // The per-step update of delayed scaling; found_inf: the GradScaler's f32
  // [1] overflow flag of this step, or undefined. A no-op for current scaling.
  void update(const Tensor& found_inf = Tensor());

  const Tensor& history() const { return history_; }
  const Tensor& scales() const { return scale_; }
  const Tensor& scale_invs() const { return scale_inv_; }

 private:
  int64_t layers_;
  Fp8Recipe recipe_;
  Tensor history_, scale_, scale_inv_, fp8_max_;
};

// y = x W^T + b through fp8 (forward only): x [*, K] and W [N, K] are cast
// with layer `layer`'s input and weight slots, then ops::fp8_linear; the bias
// (optional) is converted to the dtype cuBLASLt wants. K and N must be
// multiples of 16.
Tensor fp8_linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                          DType out_dtype);

}  // namespace hg::amp
