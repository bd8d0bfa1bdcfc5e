// Dynamic loss scaling for mixed-precision training: torch.amp.GradScaler in
// C++, with its state on the device so that a step never waits for the GPU.
//
//   hg::amp::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     hg::Tensor loss = ...;
//     scaler.scale(loss).backward();
//     scaler.unscale_(opt);                      // optional, for clipping
//     hg::optim::clip_grad_norm_(model->parameters(), 1.0);
//     scaler.step(opt);                          // skipped on the device on overflow
//     scaler.update();
//   }
//
// Note [GradScaler]
// The scale S, the growth tracker, the counters and the found-inf flags live
// in device tensors (Note [GradScaler kernels] in kernels/amp_scale/amp_scale.h);
// scale/unscale_/step/update only queue kernels: no device-to-host copy and
// no synchronisation (tests/amp checks this with the runtime's counter).
//   scale(loss)  loss * S on the device, in the promoted dtype (f32 for a
//                16-bit loss, so the scaled loss itself cannot overflow).
//   unscale_(o)  one fused multi-tensor kernel over o's gradients: checks each
//                element (before multiplying) and multiplies by 1/S; records
//                which parameters were non-finite. Once per optimizer and
//                iteration, and not after step(o) (hg::Error, as PyTorch).
//   step(o)      if unscale_(o) was not called: a read-only check pass over
//                every gradient first (so no parameter is written before the
//                whole check is done), then the fused optimizer step with
//                inv_scale and found_inf, which multiplies by 1/S in its own
//                pass and writes nothing when found_inf != 0.
//   update()     one-thread kernel: back off on overflow (not below
//                min_scale, after `hysteresis` overflows in a row), grow
//                after growth_interval clean steps (not above max_scale,
//                never to inf); resets the per-iteration state.
// Note [GradScaler across ranks]
// Under DistributedDataParallel every rank steps with the same averaged
// gradients, so found_inf already agrees (an inf on one rank becomes inf in
// the all-reduced sum everywhere). With anything sharded (each rank checks
// different gradients), or as a safety net, set_found_inf_reducer makes the
// ranks agree: found_inf is max-reduced before the optimizer step and
// found_any before update(), so every rank skips the same steps and keeps the
// same scale, growth tracker, counters and (ScheduleClock::kAuto) LR
// schedule. The reduction is one more collective on a device tensor: no host
// read is added (with NCCL it is queued on the communication stream).
// Host reads happen only when asked: get_scale(), stats(), last_overflow(),
// state_dict(), or every check_every updates. Each raises hg::Error once the
// scale has sat at min_scale through collapse_steps consecutive overflows:
// the model then produces non-finite gradients at any scale, and the error
// names the parameters whose gradients overflowed last.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/amp_scale/amp_scale.h"
#include "optim/optimizer.h"

namespace hg::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;              // false: every call is a no-op (step = opt.step())
  double min_scale = 1.0;           // never back off below this
  double max_scale = 16777216.0;    // 2^24: never grow above this (inf allowed)
  int64_t hysteresis = 1;           // back off after this many overflows in a row
  int64_t collapse_steps = 10;      // overflows in a row at min_scale before the error
  int64_t check_every = 0;          // > 0: a host read checks for collapse every N updates
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): GradScalerOptions{}.set_check_every(...).set_init_scale(...).
  // clang-format off
  constexpr GradScalerOptions& set_init_scale(double v) { init_scale = v; return *this; }
  constexpr GradScalerOptions& set_growth_factor(double v) { growth_factor = v; return *this; }
  constexpr GradScalerOptions& set_backoff_factor(double v) { backoff_factor = v; return *this; }
  constexpr GradScalerOptions& set_growth_interval(int64_t v) { growth_interval = v; return *this; }
  constexpr GradScalerOptions& set_enabled(bool v) { enabled = v; return *this; }
  constexpr GradScalerOptions& set_min_scale(double v) { min_scale = v; return *this; }
  constexpr GradScalerOptions& set_max_scale(double v) { max_scale = v; return *this; }
  constexpr GradScalerOptions& set_hysteresis(int64_t v) { hysteresis = v; return *this; }
  constexpr GradScalerOptions& set_collapse_steps(int64_t v) { collapse_steps = v; return *this; }
  constexpr GradScalerOptions& set_check_every(int64_t v) { check_every = v; return *this; }
  // clang-format on
};

struct GradScalerStats {
  double scale = 0.0;
  int64_t iterations = 0;       // update() calls
  int64_t steps_applied = 0;    // iterations without overflow
  int64_t steps_skipped = 0;    // iterations with an overflow
  int64_t growth_tracker = 0;   // clean steps since the last growth or overflow
  int64_t overflows_in_row = 0;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  // loss * scale, differentiable (loss: f16, bf16, f32 or f64).
  Tensor scale(const Tensor& loss);
  void unscale_(optim::Optimizer& opt);
  void step(optim::Optimizer& opt);
  void update();

  // Cross-rank agreement (Note [GradScaler across ranks]): `reducer` must
  // replace its f32 [1] argument, in place and on its device, by the maximum
  // over every rank (hg::distributed::sync_grad_scaler installs an
  // all_reduce(kMax) of a process group). step() applies it to found_inf
  // after the inf check and before the optimizer runs; update() applies it to
  // found_any before the scale update. Every rank must then call step() and
  // update() equally often. An empty function removes it.
  using FoundInfReducer = std::function<void(Tensor& found_inf)>;
  void set_found_inf_reducer(FoundInfReducer reducer) { reducer_ = std::move(reducer); }
  bool has_found_inf_reducer() const { return static_cast<bool>(reducer_); }

  // Names for overflow reports: each tensor is matched by identity (e.g.
  // scaler.set_parameter_names(model->named_parameters())). Unnamed
  // parameters are reported as "group G param I [shape]".
  void set_parameter_names(const std::vector<std::pair<std::string, Tensor>>& named);

  // ---- host reads (each one device-to-host copy; raise on a collapsed scale) --
  double get_scale() const;
  GradScalerStats stats() const;
  // The parameters whose gradients were non-finite in the last iteration with
  // an overflow (empty if none), in optimizer order.
  std::vector<std::string> last_overflow() const;
  // Raises hg::Error when the scale collapsed (see Note [GradScaler]).
  void check() const;
  // The counters as they stand now, copied on the device (no host read), so
  // that a loop can log them at intervals and read them later in one go:
  //   snaps.push_back(scaler.snapshot());  ...  scaler.stats_of(snaps[i])
  // stats_of is a host read like stats() (one copy; raises on a collapse).
  Tensor snapshot() const;
  GradScalerStats stats_of(const Tensor& snapshot) const;

  // The device tensors (no copy): scale f32 [1], inv_scale f32 [1]; undefined
  // before the first use.
  const Tensor& scale_tensor() const { return scale_; }
  const Tensor& inv_scale_tensor() const { return inv_scale_; }
  // f32 [1] (undefined before the first use): 1 when any optimizer
  // overflowed this iteration; update() resets it, so pass it on before
  // (amp::Fp8State::update takes it to skip the step).
  const Tensor& found_any_tensor() const { return found_any_; }

  // "scale" f32 [1], "state" i64 [kAmpStateSize], "options" f64 [9]. Loading
  // restores the options too; before the first use it is kept on the host and
  // moved to the device then.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptState {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // f32 [1], this iteration
    Tensor stamps;     // i64 [params]
    std::vector<Tensor> params;  // flattened over groups, for names
    std::vector<std::string> default_names;
    bool had_grads = false;
  };

  void ensure_state(Device device);
  OptState& opt_state(optim::Optimizer& opt);
  void check_grads(OptState& st, bool check_only);
  void raise_if_collapsed(const std::vector<int64_t>& state) const;
  std::vector<int64_t> read_state() const;
  GradScalerStats decode(const std::vector<int64_t>& state) const;
  std::vector<std::string> overflow_names(int64_t iteration_stamp) const;
  AmpScaleOptions kernel_options() const;

  GradScalerOptions options_;
  Device device_ = Device::cpu();
  bool initialized_ = false;
  Tensor scale_, inv_scale_, found_any_, state_;
  std::vector<std::pair<std::string, Tensor>> pending_;  // loaded before the first use
  std::map<const optim::Optimizer*, OptState> opts_;
  std::map<const void*, std::string> names_;  // TensorImpl* -> name
  int64_t updates_ = 0;
  FoundInfReducer reducer_;
};

}  // namespace hg::amp
