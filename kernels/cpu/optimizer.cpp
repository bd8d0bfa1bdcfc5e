// CPU reference for the fused optimizer step: the same per-element update
// (optimizer_update) in a plain loop per slot.
#include "core/convert.h"
#include "kernels/optimizer.h"

namespace hg::cpu {

namespace {

template <typename P, typename G>
void update_slot(const OptimizerSlot& s, const StepScalars& scalars) {
  P* param = static_cast<P*>(s.param.data_ptr());
  const G* grad = static_cast<const G*>(s.grad.data_ptr());
  float* master = s.master.defined() ? s.master.data<float>() : nullptr;
  float* m = s.state1.defined() ? s.state1.data<float>() : nullptr;
  float* v = s.state2.defined() ? s.state2.data<float>() : nullptr;
  const int64_t n = s.param.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float m_i = m ? m[i] : 0.0f, v_i = v ? v[i] : 0.0f;
    const float p = master ? master[i] : static_cast<float>(param[i]);
    const float updated = optimizer_update(scalars, p, static_cast<float>(grad[i]), m_i, v_i);
    if (master) master[i] = updated;
    param[i] = convert_value<P>(updated);  // the one rounding of a 16-bit parameter
    if (m) m[i] = m_i;
    if (v) v[i] = v_i;
  }
}

// Adam/AdamW over f32 weights and f32 gradients without masters (fp32 and
// AMP training): optimizer_update's arithmetic, operation for operation (so
// the result is bit-identical to the generic loop and to the CUDA kernel),
// with the per-step scalars hoisted, restrict-qualified pointers and no
// branch on the optimizer kind inside the loop, so that the compiler
// vectorises it (sqrt and division are exact in SIMD too; no FMA contraction
// in this build). The generic loop above ran at ~16 ns per parameter on the
// 784-512-512-10 MLP; this one at memory speed (docs/benchmarks.md).
template <bool kDecoupled>
void adam_f32_slot(const OptimizerSlot& s, const StepScalars& sc) {
  float* __restrict param = s.param.data<float>();
  const float* __restrict grad = s.grad.data<float>();
  float* __restrict m = s.state1.data<float>();
  float* __restrict v = s.state2.data<float>();
  const OptimizerHyper& h = sc.h;
  const float inv_scale = sc.inv_scale, beta1 = h.beta1, beta2 = h.beta2;
  const float one_minus_beta1 = 1.0f - h.beta1, one_minus_beta2 = 1.0f - h.beta2;
  const float lr = h.lr, eps = h.eps, bc1 = sc.bias_correction1, bc2 = sc.bias_correction2;
  const float weight_decay = h.weight_decay, decay = 1.0f - h.lr * h.weight_decay;
  const bool l2 = !kDecoupled && h.weight_decay != 0.0f;
  const int64_t n = s.param.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * inv_scale;
    float p = param[i];
    if (kDecoupled) {
      p *= decay;
    } else if (l2) {
      g += weight_decay * p;
    }
    const float m_i = beta1 * m[i] + one_minus_beta1 * g;
    const float v_i = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = m_i;
    v[i] = v_i;
    param[i] = p - lr * (m_i / bc1) / (__builtin_sqrtf(v_i / bc2) + eps);
  }
}

bool is_plain_f32_adam(const OptimizerSlot& s, const OptimizerHyper& h) {
  return (h.kind == OptimizerKind::kAdam || h.kind == OptimizerKind::kAdamW) && s.param.dtype() == kF32 &&
         s.grad.dtype() == kF32 && !s.master.defined() && s.state1.defined() && s.state2.defined() &&
         s.state1.dtype() == kF32 && s.state2.dtype() == kF32;
}

}  // namespace

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  if (found_inf.defined() && found_inf.data<float>()[0] != 0.0f) return;  // skipped step
  int64_t& counter = step.data<int64_t>()[0];
  counter += 1;
  const StepScalars scalars =
      step_scalars(hyper, inv_scale.defined() ? inv_scale.data<float>()[0] : 1.0f, counter);
  for (const OptimizerSlot& s : slots) {
    if (is_plain_f32_adam(s, hyper)) {
      if (hyper.kind == OptimizerKind::kAdamW) {
        adam_f32_slot<true>(s, scalars);
      } else {
        adam_f32_slot<false>(s, scalars);
      }
      continue;
    }
    dispatch_floating(s.param.dtype(), "optimizer step", [&](auto p_tag) {
      using P = decltype(p_tag);
      dispatch_floating(s.grad.dtype(), "optimizer step", [&](auto g_tag) {
        using G = decltype(g_tag);
        if constexpr (!std::is_same_v<P, double>) update_slot<P, G>(s, scalars);
      });
    });
  }
}

}  // namespace hg::cpu
