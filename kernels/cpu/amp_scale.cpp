// CPU reference for the GradScaler kernels (Note [GradScaler kernels] in
// kernels/amp_scale.h): the same element rule as the CUDA unscale kernel in a
// plain loop per gradient, and the shared one-thread update.
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/amp_scale.h"
#include "kernels/cpu/loops.h"

namespace hg::cpu {

namespace {

// Unscales (unless inv_scale is null) and checks one contiguous gradient;
// returns true when any element was (or would have become) non-finite.
template <typename G>
bool unscale_one(const Tensor& grad, const float* inv_scale) {
  using A = acc_t<G>;
  G* g = static_cast<G*>(grad.data_ptr());
  const int64_t n = grad.numel();
  if (inv_scale == nullptr) {
    return parallel_any(n, n > 65536, [&](int64_t i) { return !amp_finite(static_cast<A>(g[i])); });
  }
  const A inv = static_cast<A>(*inv_scale);
  const bool bad = parallel_any(n, n > 65536, [&](int64_t i) {
    const A v = static_cast<A>(g[i]);  // checked before the multiply
    const G out = convert_value<G>(v * inv);
    g[i] = out;
    return !amp_finite(v) || !amp_finite(static_cast<A>(out));
  });
  return bad;
}

}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const AmpUnscaleArgs& args) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const bool bad = dispatch_floating(grads[i].dtype(), "amp_unscale_", [&](auto tag) {
      return unscale_one<decltype(tag)>(grads[i], args.inv_scale);
    });
    if (bad) {
      *args.found_inf = 1.0f;
      *args.found_any = 1.0f;
      args.stamps[param_index[i]] = args.state[kAmpIteration] + 1;
    }
  }
}

void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options) {
  amp_update_state(scale.data<float>(), inv_scale.data<float>(), state.data<int64_t>(), found_any.data<float>(),
                   options);
}

}  // namespace hg::cpu
