// The GradScaler's kernels (amp/grad_scaler.h): the fused multi-tensor
// unscale-and-check over every gradient of an optimizer, and the one-thread
// scale update. Everything they read and write stays on the device, so a
// scaler step never waits for the device.
//
// Note [GradScaler kernels]
// Device state of one scaler (all tensors on the gradients' device):
//   scale      f32 [1]   the loss scale S
//   inv_scale  f32 [1]   1/S computed in f64 and rounded once to f32 (as
//                        PyTorch's reciprocal of a double scale), rewritten
//                        by every update, read by the optimizer step
//   found_inf  f32 [1]   per optimizer and iteration: 1 when any gradient of
//                        that optimizer held inf/NaN (the fused step skips)
//   found_any  f32 [1]   per scaler: 1 when any optimizer overflowed this
//                        iteration; the update reads it and resets it to 0
//   state      i64 [kAmpStateSize]  tracker, counters, the scale's f32 bits
//                        (AmpState below), so one host read gets them all
//   stamps     i64 [n]   per parameter of an optimizer: the iteration (from
//                        1) in which its gradient was last non-finite, or 0
//                        (overflow provenance without clearing anything)
//
// amp_unscale_ (one launch per call, every dtype in one chunk table):
//   for each gradient element g (read first, before any multiply):
//     bad |= !finite(g)
//     unless check_only: g = round_G(g * inv_scale) (fp32 math; f64 for f64
//       gradients), and bad |= !finite(result) (only possible when
//       inv_scale > 1, i.e. a scale below 1: a finite gradient the multiply
//       would overflow is reported, never silently passed on as inf)
//   bad -> found_inf = found_any = 1, stamps[param] = iteration + 1.
//   check_only = true is the read-only pass scaler.step runs when unscale_
//   was not called: the optimizer step then multiplies by inv_scale itself.
//
// amp_update_scale_ (one thread; amp_update_state below, shared by both
// backends):
//   overflow: skipped += 1, tracker = 0, overflows_in_row += 1; when
//             overflows_in_row >= hysteresis: S = max(S * backoff, min_scale),
//             overflows_in_row = 0. If S was already <= min_scale,
//             min_scale_overflows += 1, and reaching collapse_steps sets
//             collapsed (the host raises on its next read).
//   clean:    applied += 1, overflows_in_row = min_scale_overflows = 0,
//             tracker += 1; when tracker == growth_interval: tracker = 0 and
//             S = S * growth if that is finite and <= max_scale, else
//             max_scale if S < max_scale, else S (never inf).
//   Every += 1 saturates at kCounterLimit (Note [Counter limit] in
//   core/counters.h), so no state makes the update overflow.
//   always:   iteration += 1, inv_scale = round_f32(1 / (double)S),
//             found_any = 0.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/counters.h"
#include "core/macros.h"
#include "core/tensor.h"

namespace hg {

// Slots of the i64 state tensor.
enum AmpState : int {
  kAmpGrowthTracker = 0,   // clean steps since the last growth or overflow
  kAmpIteration,           // update() calls so far
  kAmpApplied,             // iterations without overflow
  kAmpSkipped,             // iterations with an overflow
  kAmpOverflowsInRow,      // consecutive overflows (hysteresis)
  kAmpMinScaleOverflows,   // consecutive overflows at min_scale (collapse)
  kAmpLastOverflow,        // iteration + 1 of the last overflow, 0 if none
  kAmpCollapsed,           // 1 once min_scale_overflows reached collapse_steps
  kAmpScaleBits,           // the f32 bits of the scale (for one host read)
  kAmpStateSize
};

// Slots of the f64 "options" tensor of GradScaler::state_dict (GradScalerOptions
// in this order; integer options are stored as exact doubles).
enum AmpOptionSlot : int {
  kAmpOptInitScale = 0,
  kAmpOptGrowthFactor,
  kAmpOptBackoffFactor,
  kAmpOptGrowthInterval,
  kAmpOptMinScale,
  kAmpOptMaxScale,
  kAmpOptHysteresis,
  kAmpOptCollapseSteps,
  kAmpOptCheckEvery,
  kAmpOptionCount
};

// The update rule's parameters (validated by amp::GradScaler).
struct AmpScaleOptions {
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  float min_scale = 1.0f;
  float max_scale = 16777216.0f;  // 2^24
  int64_t hysteresis = 1;
  int64_t collapse_steps = 10;
};

HG_HOST_DEVICE inline bool amp_finite(float x) { return x - x == 0.0f; }  // false for inf and NaN
HG_HOST_DEVICE inline bool amp_finite(double x) { return x - x == 0.0; }

HG_HOST_DEVICE inline int64_t amp_float_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return static_cast<int64_t>(b);
}

// The one-thread update (Note [GradScaler kernels]); both backends call it.
HG_HOST_DEVICE inline void amp_update_state(float* scale, float* inv_scale, int64_t* state, float* found_any,
                                            const AmpScaleOptions& o) {
  float s = *scale;
  if (*found_any != 0.0f) {
    state[kAmpSkipped] = saturating_increment(state[kAmpSkipped]);
    state[kAmpGrowthTracker] = 0;
    if (s <= o.min_scale) {
      state[kAmpMinScaleOverflows] = saturating_increment(state[kAmpMinScaleOverflows]);
      if (state[kAmpMinScaleOverflows] >= o.collapse_steps) state[kAmpCollapsed] = 1;
    }
    state[kAmpOverflowsInRow] = saturating_increment(state[kAmpOverflowsInRow]);
    if (state[kAmpOverflowsInRow] >= o.hysteresis) {
      const float backed = s * o.backoff_factor;
      s = backed > o.min_scale ? backed : o.min_scale;
      state[kAmpOverflowsInRow] = 0;
    }
    state[kAmpLastOverflow] = saturating_increment(state[kAmpIteration]);
  } else {
    state[kAmpApplied] = saturating_increment(state[kAmpApplied]);
    state[kAmpOverflowsInRow] = 0;
    state[kAmpMinScaleOverflows] = 0;
    state[kAmpGrowthTracker] = saturating_increment(state[kAmpGrowthTracker]);
    if (state[kAmpGrowthTracker] >= o.growth_interval) {
      state[kAmpGrowthTracker] = 0;
      const float grown = s * o.growth_factor;
      if (amp_finite(grown) && grown <= o.max_scale) {
        s = grown;
      } else if (s < o.max_scale && amp_finite(o.max_scale)) {
        s = o.max_scale;
      }
    }
  }
  state[kAmpIteration] = saturating_increment(state[kAmpIteration]);
  *scale = s;
  *inv_scale = static_cast<float>(1.0 / static_cast<double>(s));
  state[kAmpScaleBits] = amp_float_bits(s);
  *found_any = 0.0f;
}

namespace ops {

// Note [GradScaler kernels]. grads: floating tensors on one device (any
// layout: a non-contiguous one is processed through a contiguous copy that
// is written back). param_index[i] is the stamps slot of grads[i].
// inv_scale: f32 [1] (ignored when check_only); found_inf, found_any: f32
// [1]; stamps: i64 [n]; state: i64 [kAmpStateSize] (its iteration is read).
void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const Tensor& inv_scale, const Tensor& found_inf, const Tensor& found_any, const Tensor& stamps,
                  const Tensor& state, bool check_only);

// One launch of amp_update_state over the scaler's device state.
void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options);

}  // namespace ops

// Backends: arguments checked (and grads made contiguous) by the ops layer.
struct AmpUnscaleArgs {
  float* inv_scale;  // null: check only
  float* found_inf;
  float* found_any;
  int64_t* stamps;
  const int64_t* state;
};
namespace cpu {
void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const AmpUnscaleArgs& args);
void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options);
}  // namespace cpu
#if defined(HG_WITH_CUDA)
namespace cuda {
void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const AmpUnscaleArgs& args);
void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options);
}  // namespace cuda
#endif

}  // namespace hg
