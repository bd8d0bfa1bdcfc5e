// fused_optimizer_step: checks every slot once, then one backend call.
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/optimizer/optimizer.h"

namespace hg::ops {

namespace {
void check_scalar_tensor(const Tensor& t, Device device, const char* what) {
  if (!t.defined()) return;
  HG_CHECK(t.dtype() == kF32 && t.numel() == 1 && t.device() == device, "optimizer step: ", what,
           " must be an f32 one-element tensor on ", device, ", got ", t.dtype(), " ", t.shape_str(),
           " on ", t.device());
}
}  // namespace

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  HG_CHECK(step.defined(), "optimizer step: the step counter is undefined");
  const Device device = step.device();
  HG_CHECK(step.dtype() == kI64 && step.numel() == 1 && step.is_contiguous(),
           "optimizer step: the step counter must be an i64 one-element tensor, got ", step.dtype(), " ",
           step.shape_str());
  check_scalar_tensor(inv_scale, device, "inv_scale");
  check_scalar_tensor(found_inf, device, "found_inf");
  const bool adam = hyper.kind != OptimizerKind::kSgd;
  for (const OptimizerSlot& s : slots) {
    HG_CHECK(s.param.defined() && s.grad.defined(), "optimizer step: a parameter or its gradient is undefined");
    HG_CHECK(s.param.device() == device && s.grad.device() == device, "optimizer step: parameter on ",
             s.param.device(), " and gradient on ", s.grad.device(), " but the optimizer state is on ", device,
             "; create the optimizer after moving the model");
    HG_CHECK(s.param.dtype() == kF32 || is_16bit_float(s.param.dtype()),
             "optimizer step: parameters must be f32, f16 or bf16, got ", s.param.dtype());
    HG_CHECK(is_floating(s.grad.dtype()) && s.grad.dtype() != kF64, "optimizer step: gradient dtype ",
             s.grad.dtype(), " is not supported");
    HG_CHECK(s.param.sizes() == s.grad.sizes(), "optimizer step: gradient shape ", s.grad.shape_str(),
             " differs from the parameter's ", s.param.shape_str());
    HG_CHECK(s.param.is_contiguous() && s.grad.is_contiguous(), "optimizer step: parameters and gradients must be contiguous");
    HG_CHECK(is_16bit_float(s.param.dtype()) == s.master.defined(),
             "optimizer step: 16-bit parameters need an f32 master and f32 parameters must not have one");
    auto check_state = [&](const Tensor& t, bool needed, const char* what) {
      if (!needed) return;
      HG_CHECK(t.defined() && t.dtype() == kF32 && t.numel() == s.param.numel() && t.device() == device &&
                   t.is_contiguous(),
               "optimizer step: ", what, " must be a contiguous f32 tensor like the parameter");
    };
    check_state(s.master, s.master.defined(), "the master copy");
    check_state(s.state1, adam || hyper.momentum != 0.0f, "the first moment / momentum buffer");
    check_state(s.state2, adam, "the second moment");
  }
  HG_BACKEND_CALL(device, fused_optimizer_step, slots, hyper, step, inv_scale, found_inf);
  for (const OptimizerSlot& s : slots) {
    s.param.bump_version();
  }
}

}  // namespace hg::ops
