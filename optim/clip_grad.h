// clip_grad_norm_: rescales gradients so that their global norm is at most
// max_norm, as torch.nn.utils.clip_grad_norm_ does.
//
//   loss.backward();
//   hg::Tensor norm = hg::optim::clip_grad_norm_(model->parameters(), 1.0);
//   opt.step();
//
// The norm is taken over every gradient together (parameters without a
// gradient are skipped) and each gradient is multiplied in place by
// clip_coef = min(1, max_norm / (total_norm + 1e-6)). norm_type is any p > 0
// or std::numeric_limits<double>::infinity() (the max |g|). Gradients may be
// f32, f16, bf16 or f64, mixed; they are accumulated in fp32 (f64 for f64)
// and combined in f64 (Note [Global gradient norm] in kernels/grad_norm/grad_norm.h).
//
// Returns the total norm as an f32 [1] tensor on the parameters' device (a
// zero on that device, or on the CPU for an empty list, when there is no
// gradient). On CUDA this is three launches and no host sync: the clip
// coefficient stays in device memory. error_if_nonfinite = true reads the
// norm on the host (one sync) and throws hg::Error before touching any
// gradient if it is NaN or inf; otherwise a non-finite norm turns the
// gradients NaN, as in PyTorch. With a GradScaler call scaler.unscale_(opt)
// first so that max_norm applies to the true gradients.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace hg::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace hg::optim
