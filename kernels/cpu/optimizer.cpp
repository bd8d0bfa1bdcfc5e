// CPU reference for the fused optimizer step: the same per-element update
// (optimizer_update) in a plain loop per slot.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/convert.h"
#include "core/counters.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
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
  parallel_for(n, n > 65536, [&](int64_t i) {
    float m_i = m ? m[i] : 0.0f, v_i = v ? v[i] : 0.0f;
    const float p = master ? master[i] : static_cast<float>(param[i]);
    const float updated = optimizer_update(scalars, p, static_cast<float>(grad[i]), m_i, v_i);
    if (master) master[i] = updated;
    param[i] = convert_value<P>(updated);  // the one rounding of a 16-bit parameter
    if (m) m[i] = m_i;
    if (v) v[i] = v_i;
  });
}

// Adam/AdamW's arithmetic over f32 arrays: optimizer_update's, operation for
// operation (so the result is bit-identical to the generic loop and to the
// CUDA kernel), with the per-step scalars hoisted, restrict-qualified pointers
// and no branch on the optimizer kind inside the loop, so that the compiler
// vectorises it (sqrt and division are exact in SIMD too; no FMA contraction
// in this build). The generic loop above ran at ~16 ns per parameter on the
// 784-512-512-10 MLP; this one at memory speed (docs/benchmarks.md).
struct AdamScalars {
  float inv_scale, beta1, beta2, one_minus_beta1, one_minus_beta2, lr, eps, bc1, bc2, weight_decay, decay;
  bool l2;
  AdamScalars(const StepScalars& sc, bool decoupled)
      : inv_scale(sc.inv_scale),
        beta1(sc.h.beta1),
        beta2(sc.h.beta2),
        one_minus_beta1(1.0f - sc.h.beta1),
        one_minus_beta2(1.0f - sc.h.beta2),
        lr(sc.h.lr),
        eps(sc.h.eps),
        bc1(sc.bias_correction1),
        bc2(sc.bias_correction2),
        weight_decay(sc.h.weight_decay),
        decay(1.0f - sc.h.lr * sc.h.weight_decay),
        l2(!decoupled && sc.h.weight_decay != 0.0f) {}
};

template <bool kDecoupled>
void adam_f32_range(float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
                    int64_t n, const AdamScalars& c) {
  const float inv_scale = c.inv_scale, beta1 = c.beta1, beta2 = c.beta2;
  const float one_minus_beta1 = c.one_minus_beta1, one_minus_beta2 = c.one_minus_beta2;
  const float lr = c.lr, eps = c.eps, bc1 = c.bc1, bc2 = c.bc2, weight_decay = c.weight_decay, decay = c.decay;
  const bool l2 = c.l2;
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

// Elements [0, n) in blocks of kAdamBlock, fn(start, length) per block, the
// blocks split over the threads above 65536 elements.
constexpr int64_t kAdamBlock = 4096;
template <typename Fn>
void for_each_block(int64_t n, const Fn& fn) {
  const int64_t blocks = (n + kAdamBlock - 1) / kAdamBlock;
  parallel_for(blocks, n > 65536, [&](int64_t b) {
    const int64_t i0 = b * kAdamBlock;
    fn(i0, std::min(kAdamBlock, n - i0));
  });
}

// f32 weights and f32 gradients without masters (fp32 and AMP training).
template <bool kDecoupled>
void adam_f32_slot(const OptimizerSlot& s, const StepScalars& sc) {
  float* param = s.param.data<float>();
  const float* grad = s.grad.data<float>();
  float* m = s.state1.data<float>();
  float* v = s.state2.data<float>();
  const AdamScalars c(sc, kDecoupled);
  for_each_block(s.param.numel(), [&](int64_t i0, int64_t len) {
    adam_f32_range<kDecoupled>(param + i0, grad + i0, m + i0, v + i0, len, c);
  });
}

// 16-bit weights and gradients with f32 masters ("bf16+f32-masters" training):
// per block, the gradient is widened into an f32 buffer, the f32 loop above
// updates the masters, and the masters are rounded once into the weights, the
// conversions by the vectorised row converters (kernels/cpu/convert_simd.h,
// exact / round-to-nearest-even as core/half.h). Bit-identical to the generic
// loop, which ran at ~10 ns per parameter (the 4096-wide MLP's 67M parameters:
// most of a bf16 training step once the GEMM is native).
template <bool kDecoupled, typename P>
void adam_master_slot(const OptimizerSlot& s, const StepScalars& sc) {
  P* param = s.param.data<P>();
  const P* grad = s.grad.data<P>();
  float* master = s.master.data<float>();
  float* m = s.state1.data<float>();
  float* v = s.state2.data<float>();
  const AdamScalars c(sc, kDecoupled);
  for_each_block(s.param.numel(), [&](int64_t i0, int64_t len) {
    alignas(64) float g[kAdamBlock];
    widen_row(grad + i0, g, len);
    adam_f32_range<kDecoupled>(master + i0, g, m + i0, v + i0, len, c);
    narrow_row(master + i0, param + i0, len);  // the one rounding of the weight
  });
}

bool is_adam(const OptimizerHyper& h) { return h.kind == OptimizerKind::kAdam || h.kind == OptimizerKind::kAdamW; }

bool f32_states(const OptimizerSlot& s) {
  return s.state1.defined() && s.state2.defined() && s.state1.dtype() == kF32 && s.state2.dtype() == kF32;
}

bool is_plain_f32_adam(const OptimizerSlot& s, const OptimizerHyper& h) {
  return is_adam(h) && s.param.dtype() == kF32 && s.grad.dtype() == kF32 && !s.master.defined() && f32_states(s);
}

bool is_16bit_master_adam(const OptimizerSlot& s, const OptimizerHyper& h) {
  return is_adam(h) && is_16bit_float(s.param.dtype()) && s.grad.dtype() == s.param.dtype() && s.master.defined() &&
         s.master.dtype() == kF32 && f32_states(s) && s.param.is_contiguous() && s.grad.is_contiguous();
}

}  // namespace

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  if (found_inf.defined() && found_inf.data<float>()[0] != 0.0f) return;  // skipped step
  int64_t& counter = step.data<int64_t>()[0];
  counter = saturating_increment(counter);  // Note [Counter limit] in core/counters.h
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
    if (is_16bit_master_adam(s, hyper)) {
      const bool decoupled = hyper.kind == OptimizerKind::kAdamW;
      if (s.param.dtype() == kF16) {
        decoupled ? adam_master_slot<true, half>(s, scalars) : adam_master_slot<false, half>(s, scalars);
      } else {
        decoupled ? adam_master_slot<true, bfloat16>(s, scalars) : adam_master_slot<false, bfloat16>(s, scalars);
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
