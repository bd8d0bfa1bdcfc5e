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
//     scaling] in kernels/fp8/fp8.h: scale = fp8_max / amax / 2^margin over the
//     history's max or its newest entry) and rolls it. One launch for all
//     slots, no host read; with the GradScaler's found_inf set, nothing
//     changes (the step is skipped like the optimizer's).
//   current: each cast first measures the tensor's amax and derives the
//     scale from it (history length 1), then casts: one more pass over the
//     tensor, no stale scales; update() is not needed.
// State (f32, on the device): history [L, 3 layers], scale, scale_inv and
// fp8_max [3 layers]; the scales start at 1. Saturation counts (i64 [3
// layers], on the device): every cast adds the number of values it clipped
// at the format's max (Note [fp8 scaled casts]) to its slot's counter, so an
// overflow is traced to a layer and a role without a host read; they are
// read on request (saturation_counts(), Fp8Training::saturation()).
//
// Note [fp8 linear backward]
// fp8_linear is differentiable. Forward, for x [M, K] (leading dims
// flattened) and W [N, K]: qx = cast(x, input), qw = cast(W, weight) (E4M3),
// y = sx_inv sw_inv (qx qw^T) + b through ops::fp8_linear; when a gradient
// is needed it also keeps two K-major fp8 copies for the backward:
// qw^T [K, N] (K N bytes) and qx^T [K, Mp] (K Mp bytes, Mp = M rounded up to
// 16, the padding columns zero), instead of x and W themselves. Backward,
// for dy [M, N]: qg = cast(dy, grad_output) (E5M2 under the hybrid format,
// E4M3 under e4m3), then two more fp8 GEMMs in cuBLASLt's only fp8 layout
// (TN: both operands K-major, reduction dims multiples of 16):
//   dX [M, K] = sg_inv sw_inv (qg    [M, N]  @ (qw^T [K, N])^T)   reduces N
//   dW [N, K] = sg_inv sx_inv (qg^T  [N, Mp] @ (qx^T [K, Mp])^T)  reduces Mp
// with qg^T [N, Mp] one more transposed copy (N Mp bytes; the zero padding
// adds nothing to the sums). dX comes out in x's dtype, dW in W's (f32 for
// f32 master weights), db = the f32 column sum of dy, rounded once to the
// bias's dtype (never fp8). Bytes per step beyond the three casts (M K + N K
// + M N read as 16/32-bit, written as 1 byte): K Mp + K N + N Mp written
// for the transposed copies. 3 GEMMs of 2 M N K FLOPs each, all in fp8.
// A layer called twice in one step records the amax of its last call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "core/tensor.h"
#include "kernels/fp8/fp8.h"
#include "nn/layers.h"
#include "nn/module.h"

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

  // x cast to the role's format with the slot's scale (Note [fp8 recipe]);
  // the clipped values are added to the slot's saturation counter.
  Tensor cast(const Tensor& x, int64_t layer, Fp8Role role);
  // The per-step update of delayed scaling; found_inf: the GradScaler's f32
  // [1] overflow flag of this step, or undefined. A no-op for current scaling.
  void update(const Tensor& found_inf = Tensor());

  const Tensor& history() const { return history_; }
  const Tensor& scales() const { return scale_; }
  const Tensor& scale_invs() const { return scale_inv_; }
  // i64 [3 layers] on the device, slot order (no copy).
  const Tensor& saturation_counts_tensor() const { return saturated_; }
  // One slot's counter (i64 [1] view).
  Tensor saturated(int64_t layer, Fp8Role role) const;
  // A host read (one device-to-host copy): the counters, slot order.
  std::vector<int64_t> saturation_counts() const;
  void reset_saturation_counts();

  // "history" [L, n], "scale" [n], "scale_inv" [n], "saturated" [n] and
  // "recipe" (f64 [5]: format, scaling, history length, margin, amax
  // compute). Loading checks that the recipe and the layer count match and
  // copies in place, on the device: a resumed run continues bit for bit.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  int64_t layers_;
  Fp8Recipe recipe_;
  Tensor history_, scale_, scale_inv_, fp8_max_, saturated_;
};

// y = x W^T + b through fp8 (forward only): x [*, K] and W [N, K] are cast
// with layer `layer`'s input and weight slots, then ops::fp8_linear; the bias
// (optional) is converted to the dtype cuBLASLt wants. K and N must be
// multiples of 16.
Tensor fp8_linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                          DType out_dtype);

// The same, differentiable (Note [fp8 linear backward]): loss.backward()
// gives x, weight and bias their gradients through fp8 GEMMs (the bias's in
// f32). `state` must outlive the backward pass.
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                  DType out_dtype);

// ---- routing nn::Linear layers through fp8 ---------------------------------
//
// Note [fp8 routing]
//   hg::amp::Fp8Training fp8(*model, device, recipe, hg::amp::keep_layers({"lm_head", "transformer.h.0"}));
//   for (...) {
//     {
//       hg::amp::Autocast autocast(hg::kBF16);  // everything else in bf16
//       hg::amp::Fp8Autocast fp8_region;         // the routed Linears in fp8
//       loss = model->loss(x, y);
//     }
//     scaler.scale(loss).backward();
//     scaler.step(*opt);
//     fp8.update(scaler);  // before scaler.update(): skipped on an overflow step
//     scaler.update();
//   }
// Fp8Training walks the model once: every nn::Linear whose in and out
// features are multiples of 16 (the fp8 GEMM's rule) and that the keep
// filter does not select becomes fp8 layer i (state slots 3i .. 3i+2, in
// named_modules order) with a route (nn::Linear::set_route) to fp8_linear;
// the others stay as they are and are listed in kept() with the reason.
// A route runs fp8 only inside an Fp8Autocast region (thread-local, like
// Transformer Engine's fp8_autocast) and for f32/f16/bf16 inputs and
// weights on the state's device; elsewhere the layer runs its ordinary path
// (so under Autocast(kBF16), bf16). The output dtype is the autocast dtype
// inside an Autocast region, else the input's. Tied or functional
// projections (GPT's lm_head is linear(x, wte.weight)) are not nn::Linear
// modules and are never routed. The destructor removes the routes. A device
// without fp8 GEMMs (amp::supported(device, kF8E4M3) false: a GPU below
// compute capability 8.9) is refused with an hg::Error naming it.

// true: keep this Linear out of fp8 (name: its dotted name in the model).
using Fp8Keep = std::function<bool(const std::string& name, const nn::Linear& layer)>;
// Keeps the layers whose dotted name equals one of `names` or lies under it
// ("transformer.h.0" keeps every Linear of the first block).
Fp8Keep keep_layers(std::vector<std::string> names);

class Fp8Autocast {
 public:
  explicit Fp8Autocast(bool enabled = true);
  ~Fp8Autocast();
  Fp8Autocast(const Fp8Autocast&) = delete;
  Fp8Autocast& operator=(const Fp8Autocast&) = delete;

 private:
  bool saved_;
};
bool is_fp8_autocast_enabled();

struct Fp8LayerSaturation {
  std::string layer;
  int64_t input = 0, weight = 0, grad_output = 0;  // values clipped at the fp8 max, since the last reset
};

class Fp8Training {
 public:
  Fp8Training(nn::Module& model, Device device, const Fp8Recipe& recipe = {}, Fp8Keep keep = {});
  ~Fp8Training();
  Fp8Training(const Fp8Training&) = delete;
  Fp8Training& operator=(const Fp8Training&) = delete;

  // The fp8 layers' names, in state order (layer i = slots 3i .. 3i+2).
  const std::vector<std::string>& layers() const { return names_; }
  // The Linears left out: {name, reason} ("kept by the filter", "in/out
  // features not multiples of 16").
  const std::vector<std::pair<std::string, std::string>>& kept() const { return kept_; }
  Fp8State& state() { return *state_; }
  const Fp8State& state() const { return *state_; }

  // The per-step update (Note [fp8 recipe]), skipped on the device when the
  // scaler found an overflow this iteration: call after scaler.step() and
  // before scaler.update() (which clears the flag). No host read.
  void update(const GradScaler& scaler);
  void update(const Tensor& found_inf = Tensor());

  // A host read: the saturation counts per fp8 layer.
  std::vector<Fp8LayerSaturation> saturation() const;
  // One line: how many Linears run in fp8, which are kept and why.
  std::string summary() const;

  // The state's (Fp8State::state_dict) under "fp8." names, for a checkpoint's
  // extra tensors; load_state_dict takes the same names.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  std::shared_ptr<Fp8State> state_;
  std::vector<std::weak_ptr<nn::Linear>> routed_;
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, std::string>> kept_;
};

}  // namespace hg::amp
