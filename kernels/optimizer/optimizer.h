// Fused optimizer steps (SGD, Adam, AdamW) over many parameters at once, with
// fp32 master weights for 16-bit parameters and an on-device skip switch.
//
// Note [Fused optimizer step]
// For every parameter slot: g = grad * inv_scale (in fp32); the update runs on
// the fp32 master (or on the f32 parameter itself) and the moments (fp32), and
// a 16-bit parameter is rewritten as the master rounded once — all in one
// pass over the elements. The step counter (an i64 [1] tensor: exact for any
// run, where an f32 counter stops at 2^24), inv_scale and found_inf (f32 [1])
// live in device memory: when *found_inf != 0 nothing is written and the
// counter does not advance, so a scaler can skip steps with no host sync.
// Bias correction and a device-side LR schedule are computed once per launch
// from the exact count (step_scalars).
// On CUDA one launch covers all slots of one (param dtype, grad dtype) pair:
// a table of 2048-element chunks, one block per chunk (multi-tensor apply).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/macros.h"
#include "core/tensor.h"

namespace hg {

enum class OptimizerKind : uint8_t { kSgd, kAdam, kAdamW };

// Note [Schedules on the device]
// An LR schedule normally lives on the host: the scheduler writes lr before
// each step, counting its own step() calls. A step skipped on the device (a
// GradScaler's found_inf) still advances such a schedule, because the host
// cannot know of the skip without a sync. An LrSchedule installed in the
// hyperparameters instead is evaluated by the fused step itself, from the
// device step counter, which only moves on applied steps: the k-th *applied*
// step (from 0) runs at lr * lr_schedule_factor(schedule, k), with no host
// sync. The host scheduler classes (optim/lr_scheduler.h) evaluate the same
// function, so both clocks give identical lr bits while no step is skipped.
// kTable: a user-defined schedule (optim::LambdaLR), tabulated once on the
// host into an f64 tensor on the parameters' device; the device reads
// table[min(k, table_size - 1)].
enum class LrScheduleKind : uint8_t { kConstant, kWarmupCosine, kStep, kTable };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;   // warmup-cosine: linear warmup length W
  int64_t total_steps = 1;    // warmup-cosine: T, the end of the cosine (> W)
  double min_lr_ratio = 0.0;  // warmup-cosine: r, the final factor
  int64_t step_size = 1;      // step: steps between decays
  double gamma = 1.0;         // step: the decay multiplier
  const double* table = nullptr;  // table: the factors, in the memory of the device that evaluates them
  int64_t table_size = 0;         // table: entries (>= 1)
};

// The lr multiplier after k steps (k >= 0):
//   warmup-cosine: (k+1)/(W+1) for k < W; r + (1-r)(1 + cos(pi (k-W)/(T-W)))/2 for W <= k < T; r after
//   step:          gamma ^ floor(k / step_size)
//   table:         table[min(k, table_size - 1)]
HG_HOST_DEVICE inline double lr_schedule_factor(const LrSchedule& s, int64_t k) {
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return 1.0;
    case LrScheduleKind::kWarmupCosine: {
      if (k < s.warmup_steps) return static_cast<double>(k + 1) / static_cast<double>(s.warmup_steps + 1);
      if (k >= s.total_steps) return s.min_lr_ratio;
      const double progress =
          static_cast<double>(k - s.warmup_steps) / static_cast<double>(s.total_steps - s.warmup_steps);
      return s.min_lr_ratio + (1.0 - s.min_lr_ratio) * 0.5 * (1.0 + ::cos(3.141592653589793 * progress));
    }
    case LrScheduleKind::kStep:
      return ::pow(s.gamma, static_cast<double>(k / s.step_size));
    case LrScheduleKind::kTable:
      return s.table[k < s.table_size ? k : s.table_size - 1];
  }
  return 1.0;
}

struct OptimizerHyper {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.01f;            // the lr, or the base lr of a device-side schedule
  LrSchedule schedule;         // kConstant: lr as is (Note [Schedules on the device])
  float weight_decay = 0.0f;
  float momentum = 0.0f;   // SGD
  float dampening = 0.0f;  // SGD
  bool nesterov = false;   // SGD
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // Adam, AdamW
};

// One parameter and its optimizer state, all on one device.
struct OptimizerSlot {
  Tensor param;   // f32, f16 or bf16, contiguous
  Tensor grad;    // same shape, any floating dtype, contiguous
  Tensor master;  // f32 copy of a 16-bit param; undefined for f32 params
  Tensor state1;  // f32: SGD momentum buffer / Adam exp_avg (undefined if unused)
  Tensor state2;  // f32: Adam exp_avg_sq (undefined if unused)
};

// The per-step scalars every element needs, computed once per step by
// step_scalars (on the device, from the device counter).
struct StepScalars {
  OptimizerHyper h;             // h.lr: the lr of this step (schedule applied)
  float inv_scale = 1.0f;
  int64_t step = 1;             // the step being applied (1 for the first), exact
  float bias_correction1 = 1;   // Adam: 1 - beta1^step, in f64 then rounded
  float bias_correction2 = 1;   // Adam: 1 - beta2^step
};

// The lr of the step numbered `step` (1 for the first applied step): h.lr, or
// h.lr times the device-side schedule's factor after step - 1 applied steps.
HG_HOST_DEVICE inline float scheduled_lr(const OptimizerHyper& h, int64_t step) {
  if (h.schedule.kind == LrScheduleKind::kConstant) return h.lr;
  return static_cast<float>(static_cast<double>(h.lr) * lr_schedule_factor(h.schedule, step - 1));
}

// The scalars of step `step`: the scheduled lr and Adam's bias corrections,
// evaluated in f64 from the exact count (as PyTorch does in Python floats).
HG_HOST_DEVICE inline StepScalars step_scalars(const OptimizerHyper& h, float inv_scale, int64_t step) {
  StepScalars s{h, inv_scale, step, 1.0f, 1.0f};
  s.h.lr = scheduled_lr(h, step);
  if (h.kind != OptimizerKind::kSgd) {
    s.bias_correction1 = static_cast<float>(1.0 - ::pow(static_cast<double>(h.beta1), static_cast<double>(step)));
    s.bias_correction2 = static_cast<float>(1.0 - ::pow(static_cast<double>(h.beta2), static_cast<double>(step)));
  }
  return s;
}

// The update of one element: returns the new master value; updates m and v.
// s comes from step_scalars (once per launch).
HG_HOST_DEVICE inline float optimizer_update(const StepScalars& s, float p, float g, float& m, float& v) {
  const OptimizerHyper& h = s.h;
  g *= s.inv_scale;
  switch (h.kind) {
    case OptimizerKind::kSgd: {
      if (h.weight_decay != 0.0f) g += h.weight_decay * p;
      if (h.momentum != 0.0f) {
        m = s.step <= 1 ? g : h.momentum * m + (1.0f - h.dampening) * g;
        g = h.nesterov ? g + h.momentum * m : m;
      }
      return p - h.lr * g;
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      if (h.kind == OptimizerKind::kAdamW) {
        p *= 1.0f - h.lr * h.weight_decay;  // decoupled decay
      } else if (h.weight_decay != 0.0f) {
        g += h.weight_decay * p;
      }
      m = h.beta1 * m + (1.0f - h.beta1) * g;
      v = h.beta2 * v + (1.0f - h.beta2) * g * g;
      return p - h.lr * (m / s.bias_correction1) / (sqrtf(v / s.bias_correction2) + h.eps);
    }
  }
  return p;
}

namespace ops {
// Applies one step to every slot (Note [Fused optimizer step]). step is an
// i64 [1] tensor, the optional inv_scale and found_inf are f32 [1] tensors,
// all on the slots' device.
void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale = Tensor(),
                          const Tensor& found_inf = Tensor());
}  // namespace ops

namespace cpu {
void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf);
}
#if defined(HG_WITH_CUDA)
namespace cuda {
void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf);
}
#endif

}  // namespace hg
