// amp_unscale_ / amp_update_scale_: check every argument once, then one
// backend call (Note [GradScaler kernels] in kernels/amp_scale/amp_scale.h).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/amp_scale/amp_scale.h"
#include "kernels/dispatch.h"

namespace hg::ops {

namespace {
void check_device_scalar(const Tensor& t, DType dtype, int64_t numel, Device device, const char* what) {
  HG_CHECK(t.defined() && t.dtype() == dtype && t.numel() == numel && t.device() == device && t.is_contiguous(),
           "GradScaler kernels: ", what, " must be a contiguous ", dtype, " tensor of ", numel, " element(s) on ",
           device, ", got ", t.defined() ? std::string(dtype_name(t.dtype())) : std::string("an undefined tensor"),
           t.defined() ? " " + t.shape_str() : std::string());
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}
}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const Tensor& inv_scale, const Tensor& found_inf, const Tensor& found_any, const Tensor& stamps,
                  const Tensor& state, bool check_only) {
  HG_CHECK(grads.size() == param_index.size(), "amp_unscale_: ", grads.size(), " gradients but ",
           param_index.size(), " parameter indices");
  if (grads.empty()) return;
  const Device device = state.device();
  if (!check_only) check_device_scalar(inv_scale, kF32, 1, device, "inv_scale");
  check_device_scalar(found_inf, kF32, 1, device, "found_inf");
  check_device_scalar(found_any, kF32, 1, device, "found_any");
  check_device_scalar(state, kI64, kAmpStateSize, device, "the state");
  HG_CHECK(stamps.defined() && stamps.dtype() == kI64 && stamps.device() == device && stamps.is_contiguous(),
           "amp_unscale_: the stamps must be a contiguous i64 tensor on ", device);
  std::vector<Tensor> work;
  work.reserve(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    HG_CHECK(g.defined(), "amp_unscale_: gradient ", i, " is undefined");
    HG_CHECK(is_floating(g.dtype()), "amp_unscale_: gradient ", i, " has dtype ", g.dtype(),
             "; gradients must be f32, f16, bf16 or f64");
    HG_CHECK(g.device() == device, "amp_unscale_: gradient ", i, " is on ", g.device(), " but the scaler state is on ",
             device, "; use one GradScaler per device");
    HG_CHECK(param_index[i] >= 0 && param_index[i] < stamps.numel(), "amp_unscale_: parameter index ",
             param_index[i], " is outside the ", stamps.numel(), " stamps");
    // A strided gradient goes through a contiguous copy (written back below).
    work.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  const AmpUnscaleArgs args{check_only ? nullptr : ptr<float>(inv_scale), ptr<float>(found_inf),
                            ptr<float>(found_any), ptr<int64_t>(stamps), ptr<const int64_t>(state)};
  HG_BACKEND_CALL(device, amp_unscale_, work, param_index, args);
  if (check_only) return;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (work[i].impl_ptr() != grads[i].impl_ptr()) {
      Tensor strided = grads[i];
      strided.copy_(work[i]);
    }
    grads[i].bump_version();
  }
}

void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options) {
  const Device device = state.device();
  check_device_scalar(scale, kF32, 1, device, "the scale");
  check_device_scalar(inv_scale, kF32, 1, device, "inv_scale");
  check_device_scalar(state, kI64, kAmpStateSize, device, "the state");
  check_device_scalar(found_any, kF32, 1, device, "found_any");
  HG_BACKEND_CALL(device, amp_update_scale_, scale, inv_scale, state, found_any, options);
}

}  // namespace hg::ops
