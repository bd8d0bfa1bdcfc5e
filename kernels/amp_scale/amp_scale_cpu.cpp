// CPU GradScaler kernels (Note [GradScaler kernels] in kernels/amp_scale/amp_scale.h):
// the CUDA unscale kernel's element rule over every gradient, and the shared
// one-thread update.
//
// Element rule: a gradient is non-finite when any value is inf or NaN, before
// the multiply (v) or after it and its rounding to the gradient's dtype
// (out = dtype(v * inv_scale)); with no inv_scale (the check before a fused
// step) only v is checked and nothing is written. For f32, f16 and bf16 the
// test is on the bits: every exponent bit set (0x7f800000, 0x7c00, 0x7f80)
// means inf or NaN, which is amp_finite(float(x)) == false; as an integer OR
// over the lanes it vectorises (no branch per value). A 16-bit gradient is
// unscaled per block: widened into an f32 buffer by the row converters
// (kernels/cpu/convert_simd.h), multiplied, rounded back once (RNE, as
// convert_value) and checked after the rounding. f64 gradients keep the
// plain loop of amp_finite.
//
// Threads: the gradients of one call are cut into blocks of kScaleBlock
// values, all tensors' blocks in one list split over the threads in one
// OpenMP region (Note [One parallel region per optimizer step] in
// kernels/optimizer/optimizer_cpu.cpp); below 65536 values in all, no libgomp entry.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/convert.h"
#include "kernels/amp_scale/amp_scale.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"

namespace hg::cpu {

namespace {

constexpr int64_t kScaleBlock = 8192;

// The exponent fields of f32, f16 and bf16: all ones = inf or NaN.
constexpr uint32_t kF32Exponent = 0x7f800000u;
constexpr uint16_t kF16Exponent = 0x7c00, kBF16Exponent = 0x7f80;

// Any of n values of bits x (f32, or a 16-bit type with the given exponent
// mask) inf or NaN.
template <typename U>
bool any_nonfinite(const U* __restrict x, int64_t n, U mask) {
  U any = 0;
  for (int64_t i = 0; i < n; ++i) any |= static_cast<U>((x[i] & mask) == mask);
  return any != 0;
}

// f32: x = x * inv in place; true when any input or output is inf or NaN.
bool unscale_f32(float* __restrict x, int64_t n, float inv) {
  uint32_t any = 0;
  constexpr uint32_t kMask = kF32Exponent;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float out = v * inv;
    x[i] = out;
    uint32_t bv, bo;
    std::memcpy(&bv, &v, 4);
    std::memcpy(&bo, &out, 4);
    any |= static_cast<uint32_t>((bv & kMask) == kMask) | static_cast<uint32_t>((bo & kMask) == kMask);
  }
  return any != 0;
}

// 16-bit: the same through an f32 block, rounded once on the way back.
template <typename G>
bool unscale_16bit(G* x, int64_t n, float inv, uint16_t mask) {
  uint16_t* bits = reinterpret_cast<uint16_t*>(x);
  const bool bad_in = any_nonfinite<uint16_t>(bits, n, mask);
  alignas(64) float buf[kScaleBlock];
  widen_row(x, buf, n);
  for (int64_t i = 0; i < n; ++i) buf[i] *= inv;
  narrow_row(buf, x, n);
  return any_nonfinite<uint16_t>(bits, n, mask) || bad_in;
}

// One block of one gradient (f32, f16 or bf16).
bool unscale_block(const Tensor& grad, int64_t i0, int64_t n, const float* inv_scale) {
  switch (grad.dtype()) {
    case kF32: {
      float* x = grad.data<float>() + i0;
      if (inv_scale == nullptr) return any_nonfinite<uint32_t>(reinterpret_cast<const uint32_t*>(x), n, kF32Exponent);
      return unscale_f32(x, n, *inv_scale);
    }
    case kF16: {
      half* x = grad.data<half>() + i0;
      if (inv_scale == nullptr) return any_nonfinite<uint16_t>(reinterpret_cast<const uint16_t*>(x), n, kF16Exponent);
      return unscale_16bit(x, n, *inv_scale, kF16Exponent);
    }
    default: {  // kBF16
      bfloat16* x = grad.data<bfloat16>() + i0;
      if (inv_scale == nullptr) return any_nonfinite<uint16_t>(reinterpret_cast<const uint16_t*>(x), n, kBF16Exponent);
      return unscale_16bit(x, n, *inv_scale, kBF16Exponent);
    }
  }
}

// The plain element loop (f64 gradients): unscales (unless inv_scale is null)
// and checks one contiguous gradient.
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

struct ScaleBlock {
  size_t tensor;
  int64_t start, length;
};

}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const AmpUnscaleArgs& args) {
  // Per gradient: inf or NaN found (written by any thread, read after the region).
  std::unique_ptr<std::atomic<bool>[]> bad(new std::atomic<bool>[grads.size()]);
  std::vector<ScaleBlock> blocks;
  int64_t total = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    bad[i].store(false, std::memory_order_relaxed);
    const DType dt = grads[i].dtype();
    if (dt != kF32 && dt != kF16 && dt != kBF16) {
      bad[i].store(dispatch_floating(dt, "amp_unscale_",
                                     [&](auto tag) { return unscale_one<decltype(tag)>(grads[i], args.inv_scale); }),
                   std::memory_order_relaxed);
      continue;
    }
    const int64_t n = grads[i].numel();
    for (int64_t i0 = 0; i0 < n; i0 += kScaleBlock) blocks.push_back({i, i0, std::min(kScaleBlock, n - i0)});
    total += n;
  }
  parallel_for(static_cast<int64_t>(blocks.size()), total > 65536, [&](int64_t b) {
    const ScaleBlock& k = blocks[static_cast<size_t>(b)];
    if (unscale_block(grads[k.tensor], k.start, k.length, args.inv_scale)) {
      bad[k.tensor].store(true, std::memory_order_relaxed);
    }
  });
  for (size_t i = 0; i < grads.size(); ++i) {
    if (bad[i].load(std::memory_order_relaxed)) {
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
