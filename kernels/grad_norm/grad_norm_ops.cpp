// grad_norm / scale_grads_: check every gradient once, allocate the f32 [1]
// results, then one backend call (Note [Global gradient norm]).
#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/grad_norm/grad_norm.h"

namespace hg {

GradNormKind grad_norm_kind(double norm_type) {
  HG_CHECK(norm_type > 0.0, "grad norm: norm_type must be > 0 (2 for the L2 norm, ",
           "std::numeric_limits<double>::infinity() for the max norm), got ", norm_type);
  if (std::isinf(norm_type)) return GradNormKind::kInf;
  return norm_type == 2.0 ? GradNormKind::kTwo : GradNormKind::kPower;
}

namespace ops {

namespace {
Device check_grads(const std::vector<Tensor>& grads, const char* op) {
  HG_CHECK(!grads.empty(), op, ": needs at least one gradient tensor");
  const Device device = grads[0].device();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    HG_CHECK(g.defined(), op, ": gradient ", i, " is undefined");
    HG_CHECK(is_floating(g.dtype()), op, ": gradient ", i, " has dtype ", g.dtype(),
             "; gradients must be f32, f16, bf16 or f64");
    HG_CHECK(g.device() == device, op, ": gradients on ", device, " and ", g.device(), " (gradient ", i,
             "); move the model to one device first");
    HG_CHECK(g.is_contiguous(), op, ": gradient ", i, " ", g.shape_str(),
             " is not contiguous; pass grad.contiguous() and store it back with set_grad");
  }
  return device;
}
}  // namespace

GradNorm grad_norm(const std::vector<Tensor>& grads, double norm_type, double max_norm) {
  const GradNormKind kind = grad_norm_kind(norm_type);
  HG_CHECK(max_norm >= 0.0, "grad norm: max_norm must be >= 0 (inf disables clipping), got ", max_norm);
  const Device device = check_grads(grads, "grad norm");
  GradNorm out{empty({1}, {.device = device}), empty({1}, {.device = device})};
  HG_BACKEND_CALL(device, grad_norm, grads, kind, norm_type, static_cast<float>(max_norm), out.total_norm,
                  out.clip_coef);
  return out;
}

void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor) {
  const Device device = check_grads(grads, "scale_grads_");
  HG_CHECK(factor.defined() && factor.dtype() == kF32 && factor.numel() == 1 && factor.device() == device,
           "scale_grads_: the factor must be an f32 one-element tensor on ", device);
  HG_BACKEND_CALL(device, scale_grads_, grads, factor.contiguous());
  for (const Tensor& g : grads) g.bump_version();
}

}  // namespace ops
}  // namespace hg
