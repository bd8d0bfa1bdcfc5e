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

}  // namespace

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  if (found_inf.defined() && found_inf.data<float>()[0] != 0.0f) return;  // skipped step
  int64_t& counter = step.data<int64_t>()[0];
  counter += 1;
  const StepScalars scalars =
      step_scalars(hyper, inv_scale.defined() ? inv_scale.data<float>()[0] : 1.0f, counter);
  for (const OptimizerSlot& s : slots) {
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
