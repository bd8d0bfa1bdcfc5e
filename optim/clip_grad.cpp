#include "optim/clip_grad.h"

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "kernels/grad_norm/grad_norm.h"

namespace hg::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  HG_CHECK(max_norm >= 0.0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  HG_CHECK(norm_type > 0.0, "clip_grad_norm_: norm_type must be > 0 (2 for the L2 norm, ",
           "std::numeric_limits<double>::infinity() for the max norm), got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    HG_CHECK(params[i].defined(), "clip_grad_norm_: parameter ", i, " is undefined");
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    HG_CHECK(g.device() == params[i].device(), "clip_grad_norm_: parameter ", i, " is on ", params[i].device(),
             " but its gradient is on ", g.device());
    HG_CHECK(grads.empty() || g.device() == grads[0].device(), "clip_grad_norm_: gradients on ",
             grads.empty() ? g.device() : grads[0].device(), " and ", g.device(), " (parameter ", i,
             "); clip each device's parameters separately or move the model to one device");
    grads.push_back(g);
  }
  if (grads.empty()) {
    return zeros({1}, {.device = params.empty() ? Device::cpu() : params[0].device()});
  }
  const ops::GradNorm result = ops::grad_norm(grads, norm_type, max_norm);
  if (error_if_nonfinite) {
    const float norm = result.total_norm.item<float>();  // the one host sync
    HG_CHECK(std::isfinite(norm), "clip_grad_norm_: the total norm of order ", norm_type, " is ", norm,
             ", so the gradients cannot be clipped (they hold NaN or inf; with a GradScaler, call ",
             "scaler.unscale_(opt) first and let scaler.step skip the step). No gradient was changed; pass ",
             "error_if_nonfinite = false to scale them by the non-finite norm anyway");
  }
  ops::scale_grads_(grads, result.clip_coef);
  return result.total_norm;
}

}  // namespace hg::optim
