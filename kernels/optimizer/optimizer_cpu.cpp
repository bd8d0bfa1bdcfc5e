// The fused optimizer step on the CPU (Note [Fused optimizer step] in
// kernels/optimizer/optimizer.h): the per-element rule optimizer_update in a plain loop
// per slot (the scalar reference, and every case below), and for Adam/AdamW
// with f32 states (f32 weights, or 16-bit weights with f32 masters) one pass
// per element through the vector kernels of kernels/optimizer/optimizer_simd.h,
// all slots of a step in one parallel region. Every path is bit-identical to
// optimizer_update (kernels/optimizer/README.md, "Optimizer step and GradScaler on the CPU").
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(HG_OPTIMIZER_SIMD)
#include <cpuid.h>
#endif

#include "core/convert.h"
#include "core/counters.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "kernels/optimizer/optimizer_simd.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/optimizer/optimizer.h"

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

// Adam/AdamW's arithmetic over f32 arrays at the build's baseline ISA (SSE2 on
// x86-64; the path of HG_CPU_ISA=generic and of CPUs without AVX2 + F16C):
// optimizer_update's, operation for operation (so the result is bit-identical
// to the generic loop and to the vector kernels of optimizer_simd.h), with the
// per-step scalars hoisted, restrict-qualified pointers and no branch on the
// optimizer kind inside the loop, so that GCC vectorises it at -O3 (sqrt and
// division are exact in SIMD too; no FMA contraction at this ISA).
template <bool kDecoupled>
void adam_f32_range(float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
                    int64_t n, const AdamConstants& c) {
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

void adam_f32_baseline(float* param, const float* grad, float* m, float* v, int64_t n, const AdamConstants& c) {
  if (c.decoupled) {
    adam_f32_range<true>(param, grad, m, v, n, c);
  } else {
    adam_f32_range<false>(param, grad, m, v, n, c);
  }
}

// Elements are processed in blocks of kAdamBlock: the unit of the thread
// split, and the f32 gradient buffer of the baseline 16-bit loop (16 KiB on
// the stack).
constexpr int64_t kAdamBlock = 4096;

// 16-bit weights and gradients with f32 masters at the baseline ISA, one
// block: the gradient is widened into an f32 buffer, the f32 loop above
// updates the masters, and the masters are rounded once into the weights, the
// conversions by the row converters (kernels/cpu/convert_simd.h, exact /
// round-to-nearest-even as core/half.h). Bit-identical to the generic loop.
template <typename P>
void adam_master_baseline(P* param, const P* grad, float* master, float* m, float* v, int64_t len,
                          const AdamConstants& c) {
  alignas(64) float g[kAdamBlock];
  widen_row(grad, g, len);
  adam_f32_baseline(master, g, m, v, len, c);
  narrow_row(master, param, len);  // the one rounding of the weight
}

bool is_adam(const OptimizerHyper& h) { return h.kind == OptimizerKind::kAdam || h.kind == OptimizerKind::kAdamW; }

bool f32_states(const OptimizerSlot& s) {
  return s.state1.defined() && s.state2.defined() && s.state1.dtype() == kF32 && s.state2.dtype() == kF32 &&
         s.state1.is_contiguous() && s.state2.is_contiguous();
}

bool is_plain_f32_adam(const OptimizerSlot& s, const OptimizerHyper& h) {
  return is_adam(h) && s.param.dtype() == kF32 && s.grad.dtype() == kF32 && !s.master.defined() && f32_states(s) &&
         s.param.is_contiguous() && s.grad.is_contiguous();
}

bool is_16bit_master_adam(const OptimizerSlot& s, const OptimizerHyper& h) {
  return is_adam(h) && is_16bit_float(s.param.dtype()) && s.grad.dtype() == s.param.dtype() && s.master.defined() &&
         s.master.dtype() == kF32 && s.master.is_contiguous() && f32_states(s) && s.param.is_contiguous() &&
         s.grad.is_contiguous();
}

AdamConstants adam_constants(const StepScalars& sc) {
  const bool decoupled = sc.h.kind == OptimizerKind::kAdamW;
  return {sc.inv_scale,
          sc.h.beta1,
          sc.h.beta2,
          1.0f - sc.h.beta1,
          1.0f - sc.h.beta2,
          sc.h.lr,
          sc.h.eps,
          sc.bias_correction1,
          sc.bias_correction2,
          sc.h.weight_decay,
          1.0f - sc.h.lr * sc.h.weight_decay,
          decoupled,
          !decoupled && sc.h.weight_decay != 0.0f};
}

// Note [One parallel region per optimizer step]
// The Adam slots of a step (f32 weights, or 16-bit weights with f32 masters:
// 28 bytes of traffic per parameter either way) are cut into blocks of
// kAdamBlock elements, all slots' blocks in one list, and the list is split
// evenly over the threads in one OpenMP region (static schedule: each thread
// streams one contiguous run of blocks), so a GPT's dozens of small tensors
// (biases, norms) cost no region of their own and the threads' shares differ
// by at most one block. Below 65536 parameters in all the blocks run on the
// calling thread, with no libgomp entry.
struct AdamBlock {
  const OptimizerSlot* slot;
  int64_t start, length;
};

void adam_blocks(const std::vector<const OptimizerSlot*>& slots, const AdamConstants& c,
                 const OptimizerSimdTable* simd) {
  std::vector<AdamBlock> blocks;
  int64_t total = 0;
  for (const OptimizerSlot* s : slots) {
    const int64_t n = s->param.numel();
    for (int64_t i0 = 0; i0 < n; i0 += kAdamBlock) blocks.push_back({s, i0, std::min(kAdamBlock, n - i0)});
    total += n;
  }
  parallel_for(static_cast<int64_t>(blocks.size()), total > 65536, [&](int64_t b) {
    const OptimizerSlot& s = *blocks[static_cast<size_t>(b)].slot;
    const int64_t i0 = blocks[static_cast<size_t>(b)].start, len = blocks[static_cast<size_t>(b)].length;
    float* m = s.state1.data<float>() + i0;
    float* v = s.state2.data<float>() + i0;
    if (!s.master.defined()) {
      float* param = s.param.data<float>() + i0;
      const float* grad = s.grad.data<float>() + i0;
      if (simd != nullptr) {
        simd->adam_f32(param, grad, m, v, len, c);
      } else {
        adam_f32_baseline(param, grad, m, v, len, c);
      }
      return;
    }
    float* master = s.master.data<float>() + i0;
    if (simd != nullptr) {
      simd->adam_master(s.param.dtype() == kF16 ? VecType::f16 : VecType::bf16,
                        static_cast<uint16_t*>(s.param.data_ptr()) + i0,
                        static_cast<const uint16_t*>(s.grad.data_ptr()) + i0, master, m, v, len, c);
    } else if (s.param.dtype() == kF16) {
      adam_master_baseline(s.param.data<half>() + i0, s.grad.data<half>() + i0, master, m, v, len, c);
    } else {
      adam_master_baseline(s.param.data<bfloat16>() + i0, s.grad.data<bfloat16>() + i0, master, m, v, len, c);
    }
  });
}

#if defined(HG_OPTIMIZER_SIMD)
// The widest table this CPU runs (AVX2 + F16C for the 8-lane kernels, whose
// f16 conversions need F16C; AVX-512F for the 16-lane ones), from CPUID and
// the OS's register-state support as GCC's __builtin_cpu_supports reports them.
VecIsa best_optimizer_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return VecIsa::avx512;
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && ((c >> 29) & 1u) != 0;  // CPUID.1:ECX.F16C
  if (__builtin_cpu_supports("avx2") && f16c) return VecIsa::avx2;
  return VecIsa::sse2;
}
#endif

}  // namespace

#if defined(HG_OPTIMIZER_SIMD)
namespace opt_avx2 {
const OptimizerSimdTable& table();
}
namespace opt_avx512 {
const OptimizerSimdTable& table();
}
#endif

bool optimizer_scalar_reference() { return cpu_math() == CpuMath::scalar; }

const OptimizerSimdTable* optimizer_simd() {
  if (optimizer_scalar_reference()) return nullptr;
#if defined(HG_OPTIMIZER_SIMD)
  static const VecIsa best = best_optimizer_isa();
  const VecIsa cap = cpu_isa_cap();
  const VecIsa isa = static_cast<int>(cap) < static_cast<int>(best) ? cap : best;
  switch (isa) {
    case VecIsa::avx512:
      return &opt_avx512::table();
    case VecIsa::avx2:
      return &opt_avx2::table();
    case VecIsa::sse2:
      return nullptr;
  }
#endif
  return nullptr;
}

const char* optimizer_isa_name() {
  if (optimizer_scalar_reference()) return "scalar";
  const OptimizerSimdTable* t = optimizer_simd();
  return t != nullptr ? t->name : "generic";
}

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  if (found_inf.defined() && found_inf.data<float>()[0] != 0.0f) return;  // skipped step
  int64_t& counter = step.data<int64_t>()[0];
  counter = saturating_increment(counter);  // Note [Counter limit] in core/counters.h
  const StepScalars scalars =
      step_scalars(hyper, inv_scale.defined() ? inv_scale.data<float>()[0] : 1.0f, counter);
  // The Adam slots the block loop takes (Note [One parallel region per
  // optimizer step]); the others (SGD, other dtype pairs) and every slot on the
  // scalar reference path (HG_CPU_MATH=scalar) take the generic loop.
  const bool reference = optimizer_scalar_reference();
  std::vector<const OptimizerSlot*> adam;
  for (const OptimizerSlot& s : slots) {
    if (!reference && (is_plain_f32_adam(s, hyper) || is_16bit_master_adam(s, hyper))) {
      adam.push_back(&s);
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
  if (!adam.empty()) adam_blocks(adam, adam_constants(scalars), optimizer_simd());
}

}  // namespace hg::cpu
