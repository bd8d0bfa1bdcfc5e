// CPU path of foreach_apply (Note [Foreach programs] in kernels/foreach.h):
// the same interpreter as the CUDA kernel, one loop per slot.
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/foreach.h"

namespace hg::cpu {

namespace {
float load_as_float(const void* base, DType dtype, int64_t i) {
  if (dtype == kF32) return static_cast<const float*>(base)[i];
  if (dtype == kF16) return static_cast<float>(static_cast<const half*>(base)[i]);
  return static_cast<float>(static_cast<const bfloat16*>(base)[i]);
}
void store_from_float(void* base, DType dtype, int64_t i, float v) {
  if (dtype == kF32) {
    static_cast<float*>(base)[i] = v;
  } else if (dtype == kF16) {
    static_cast<half*>(base)[i] = convert_value<half>(v);
  } else {
    static_cast<bfloat16*>(base)[i] = convert_value<bfloat16>(v);
  }
}
}  // namespace

void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args) {
  ForeachScalars s;
  if (args.found_inf.defined()) s.found_inf = args.found_inf.data<float>()[0];
  if (args.masked && s.found_inf != 0.0f) return;  // skipped: write nothing
  if (args.step.defined()) s.step = args.step.data<int64_t>()[0];
  if (args.inv_scale.defined()) s.inv_scale = args.inv_scale.data<float>()[0];
  OptimizerHyper h;
  h.lr = args.lr;
  h.schedule = args.schedule;
  s.lr = scheduled_lr(h, s.step);
  float scalars[kForeachMaxRegs] = {};
  foreach_eval_scalars(program, s, scalars);
  const size_t n_lists = lists.size();
  for (size_t slot = 0; slot < lists[0].size(); ++slot) {
    void* base[kForeachMaxTensors] = {};
    DType dtype[kForeachMaxTensors] = {};
    for (size_t t = 0; t < n_lists; ++t) {
      base[t] = lists[t][slot].data_ptr();
      dtype[t] = lists[t][slot].dtype();
    }
    const int64_t n = lists[0][slot].numel();
#pragma omp parallel if (n > 65536)
    {
      // Element instructions never overwrite the scalar registers.
      float r[kForeachMaxRegs];
      for (int k = 0; k < kForeachMaxRegs; ++k) r[k] = scalars[k];
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        foreach_eval_element(
            program, r, [&](int t) { return load_as_float(base[t], dtype[t], i); },
            [&](int t, float v) { store_from_float(base[t], dtype[t], i, v); });
      }
    }
  }
}

}  // namespace hg::cpu
