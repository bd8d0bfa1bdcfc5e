// Autocast: op-level mixed precision, like torch.autocast.
//
//   {
//     hg::amp::Autocast autocast(hg::kF16);   // or Autocast() for the per-device defaults
//     loss = hg::cross_entropy(model->forward(x), y);  // matmul in f16, cross_entropy in f32
//   }
//
// Note [Autocast]
// Inside a region, each differentiable op (autograd/functions.cpp) first
// casts its floating inputs as the policy table says (Note [AMP policy
// table] in kernels/amp_policy.h): lower -> the region's dtype, fp32 -> f32,
// promote -> the widest floating input, passthrough -> as given, banned ->
// hg::Error naming the alternative. f64 and integer tensors are never cast,
// nor are inputs of in-place ops. The casts are ordinary differentiable ops
// (hg::to), so the backward casts back and an fp32 leaf gets an fp32 grad.
// The op then runs with autocast excluded, so the ops it is built from are
// not cast again (as PyTorch's dispatcher does).
// State is thread-local and kept per device type (cpu, cuda): enabled flag
// and dtype, defaults bf16 on cpu and f16 on cuda as PyTorch. Guards nest;
// each restores what it replaced, and Autocast(dtype, false) disables a
// region inside another.
//
// Note [Cast cache]
// An f32 leaf that requires grad (a weight) is cast once per outermost
// region and dtype: the cast is kept and handed back while the leaf's version
// counter is unchanged (an in-place update invalidates it); the cache is
// cleared when the outermost guard exits. Casts are cached only while grad
// mode is on, so a cast made under NoGradGuard (which has no graph) is never
// handed to a later op that needs one (pytorch#112583), and repeated no-grad
// forwards do not grow the cache.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/profiler.h"
#include "core/tensor.h"
#include "kernels/amp_policy.h"

namespace hg::amp {

// The per-device-type default autocast dtype: bf16 on cpu, f16 on cuda.
DType default_autocast_dtype(DeviceType type);

class Autocast {
 public:
  // Every device type, with this dtype (f16 or bf16).
  explicit Autocast(DType dtype, bool enabled = true);
  // Every device type with its default dtype.
  Autocast();
  // One device type (others keep their state); dtype defaults per type.
  Autocast(DeviceType type, DType dtype, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  struct Saved {
    bool enabled;
    DType dtype;
  };
  Saved saved_[kNumDeviceTypes];
};

// The first op autocast lowers to f16 on a CPU logs one warning per process
// (the CPU widens f16 matmuls, so bf16 is the fast 16-bit type there); a
// program that explains this itself (hg-train) turns it off; true arms it
// again (the next such op warns).
void set_cpu_f16_warning(bool enabled);

bool is_autocast_enabled(DeviceType type);
DType autocast_dtype(DeviceType type);
// True inside an enabled region and outside an op's own body (cheap).
bool autocast_active();

// Casts for one op call: out[i] = inputs[i] cast per the op's class (or the
// input itself). Throws for a banned op.
void autocast_inputs(OpId op, std::initializer_list<const Tensor*> inputs, Tensor* out);
// The same for a list of inputs (cat, stack): returns the cast inputs.
std::vector<Tensor> autocast_inputs(OpId op, const std::vector<Tensor>& inputs);

// Excludes autocast for its lifetime (an op's body).
class AutocastExcluded {
 public:
  AutocastExcluded();
  ~AutocastExcluded();
  AutocastExcluded(const AutocastExcluded&) = delete;
  AutocastExcluded& operator=(const AutocastExcluded&) = delete;
};

// fn(cast inputs...) with autocast excluded.
template <typename Fn, typename... Ts>
Tensor autocast_call(OpId op, Fn&& fn, const Ts&... inputs) {
  Tensor cast[sizeof...(Ts)];
  autocast_inputs(op, {&inputs...}, cast);
  AutocastExcluded excluded;
  return [&]<size_t... I>(std::index_sequence<I...>) { return fn(cast[I]...); }(std::index_sequence_for<Ts...>{});
}

// Cast cache counters of this thread (Note [Cast cache]).
struct CastCacheStats {
  int64_t casts = 0;    // cacheable casts made (misses)
  int64_t hits = 0;     // casts handed back from the cache
  int64_t entries = 0;  // current size
};
CastCacheStats cast_cache_stats();

// Hardware support of 16-bit math. cpu: f16/bf16 always run (widened to f32
// where the CPU has no native 16-bit arithmetic); cuda: f16 needs compute
// capability >= 5.3 (tensor cores from 7.0), bf16 needs >= 8.0, the fp8
// dtypes (kF8E4M3, kF8E5M2: the fp8 GEMM of kernels/fp8/fp8.h) need >= 8.9; on
// the CPU the fp8 GEMM is emulated (widened exactly, fp32 accumulation).
bool supported(Device device, DType dtype);
// One line: device name, compute capability and tensor-core f16/bf16 on a
// GPU; F16C / AVX-512-FP16 / AVX-512-BF16 / AMX presence on the CPU and
// whether 16-bit math is emulated by widening.
std::string capability_report(Device device);

}  // namespace hg::amp

// The one line at the start of each op in autograd/functions.cpp:
//   HG_AUTOCAST(OpId::exp, [](const Tensor& in) { return exp(in); }, x);
// It also opens the op's profiler scope (Note [Profiler] in core/profiler.h):
// the forward op with its inputs' shapes, around the casts and the op.
#define HG_AUTOCAST(op, fn, ...)                                                \
  const ::hg::profiler::OpScope hg_profiled_op(::hg::op_name(op), __VA_ARGS__); \
  if (::hg::amp::autocast_active()) return ::hg::amp::autocast_call(op, fn, __VA_ARGS__)
