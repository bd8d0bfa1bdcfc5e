// CPU reference kernels for elementwise ops: unary, unary backward, binary,
// scalar, where, copy and fill. The numerical oracle for the CUDA kernels.
//
// The math of every op is its functor in kernels/elementwise/elementwise_functors.h and
// the dispatch is kernels/elementwise/elementwise_engine.h, both shared with the CUDA
// engine; this file plugs in the CPU loop (cpu::map_typed: OpenMP over
// contiguous operands, an odometer over strided ones).
//
// Precision contract: 16-bit values are widened to float, the math runs in
// float (double for f64), and the result is rounded once on store. Integer
// ops run in the integer type. NaN in, NaN out for every floating op.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/elementwise/f16_native.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise/elementwise_engine.h"

namespace hg::cpu {

namespace {

// HG_CPU_EW_BLOCKS=0 (read once) turns the blocked 16-bit path off: the
// per-element loop, for the bit-identity test and for A/B timing.
const bool g_16bit_blocks = [] {
  const char* env = std::getenv("HG_CPU_EW_BLOCKS");
  return !(env != nullptr && std::strcmp(env, "0") == 0);
}();

// Note [16-bit element-wise blocks on the CPU]
// A 16-bit element-wise op widens each value to float, computes and rounds
// once (the adapters of kernels/elementwise/elementwise_engine.h). Done one value at a
// time, the conversions dominate: the bf16 ReLU ran at 4 ns per element. For
// contiguous 16-bit operands of one dtype the CPU loop instead widens blocks
// of kBlock values with the vectorised converters (kernels/cpu/convert_simd.h),
// runs the same adapter instantiated for float (ForwardOf<float, F>: the same
// functor F, the same float math, no conversions) over the block, and rounds
// the block back with the vectorised round-to-nearest-even. The converters are
// bit-identical to core/half.h's, so every value is the per-element loop's
// (test "16-bit element-wise blocks are bit-identical"); only a NaN result's
// sign or payload may differ, as it may between any two compilations of the
// same float expression (x86 propagates one operand's NaN, and which one
// follows the compiler's operand order).
template <typename Fn>
struct FloatAdapter {
  static constexpr bool kHas = false;
};
template <typename T, typename F>
struct FloatAdapter<ew::ForwardOf<T, F>> {
  static constexpr bool kHas = true;
  static ew::ForwardOf<float, F> make(const ew::ForwardOf<T, F>& fn) { return {fn.f}; }
};
template <typename T, typename F>
struct FloatAdapter<ew::BackwardOf<T, F>> {
  static constexpr bool kHas = true;
  static ew::BackwardOf<float, F> make(const ew::BackwardOf<T, F>& fn) { return {fn.f}; }
};
template <typename T, typename F>
struct FloatAdapter<ew::BinaryOf<T, F>> {
  static constexpr bool kHas = std::is_same_v<ew::binary_out_t<T, F>, T>;  // not comparisons
  static ew::BinaryOf<float, F> make(const ew::BinaryOf<T, F>& fn) { return {fn.f}; }
};
template <typename T, typename F>
struct FloatAdapter<ew::ScalarOf<T, F>> {
  static constexpr bool kHas = std::is_same_v<ew::binary_out_t<T, F>, T>;
  static ew::ScalarOf<float, F> make(const ew::ScalarOf<T, F>& fn) { return {fn.f, fn.scalar}; }
};

// Runs block(b) for every block b of `blocks`, in parallel from the grain up
// (a plain loop below it: no libgomp entry).
template <typename Block>
void for_blocks(int64_t n, int64_t blocks, const Block& block) {
  if (n < kParallelGrain) {
    for (int64_t b = 0; b < blocks; ++b) block(b);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) block(b);
}

// Widens blocks of kBlock values of each 16-bit input, runs
// compute(bufs, res, len) on the floats and rounds res back into out.
template <typename T, size_t kIn, typename Compute>
void map_16bit_blocks_with(const Tensor& out, const std::array<const T*, kIn>& in, const Compute& compute) {
  constexpr int64_t kBlock = 256;
  const int64_t n = out.numel();
  T* o = static_cast<T*>(out.data_ptr());
  for_blocks(n, (n + kBlock - 1) / kBlock, [&](int64_t b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    float buf[kIn][kBlock];
    float res[kBlock];
    for (size_t k = 0; k < kIn; ++k) widen_row<T>(in[k] + i0, buf[k], len);
    compute(buf, res, len);
    narrow_row<T>(res, o + i0, len);
  });
}

template <typename T, typename Fn, typename... Tensors>
void map_16bit_blocks(const Tensor& out, const Fn& fn, const Tensors&... ins) {
  constexpr size_t kIn = sizeof...(Tensors);
  const auto wide = FloatAdapter<Fn>::make(fn);
  const std::array<const T*, kIn> in{static_cast<const T*>(ins.data_ptr())...};
  map_16bit_blocks_with<T, kIn>(out, in, [&](const float(*buf)[256], float* res, int64_t len) {
    [&]<size_t... K>(std::index_sequence<K...>) {
      for (int64_t i = 0; i < len; ++i) res[i] = wide(buf[K][i]...);
    }
    (std::make_index_sequence<kIn>{});
  });
}

// Note [SLEEF blocks in the element-wise loop]
// A unary op with a transcendental function (vec_unary_has: exp, log, tanh,
// erf, sigmoid, silu, gelu, gelu_tanh, softplus; their backwards where
// vec_unary_backward_has) on contiguous f32 or 16-bit operands runs as the
// vector kernel of kernels/cpu/vec_math.h over blocks of 4096 values (the
// threads' unit of work). A 16-bit kernel widens its lanes in the vector
// registers and rounds the results back there (round-to-nearest-even): no f32
// copy of a block is made. It computes the f32 kernel's float values, so a
// 16-bit result is still the f32 result rounded once. HG_CPU_MATH=scalar
// (cpu::set_cpu_math) leaves every op to the functor loops below.
template <typename Fn>
struct VecUnary {
  static constexpr bool kHas = false;
};
template <typename T, OpId kOp>
struct VecUnary<ew::ForwardOf<T, ew::Unary<kOp, float>>> {
  static constexpr bool kHas = true;
  static constexpr bool kBackward = false;
  static constexpr OpId op = kOp;
};
template <typename T, OpId kOp>
struct VecUnary<ew::BackwardOf<T, ew::Unary<kOp, float>>> {
  static constexpr bool kHas = true;
  static constexpr bool kBackward = true;
  static constexpr OpId op = kOp;
};

// True when it ran the op (see the note); false leaves it to the caller.
template <typename Out, typename Fn, typename... Tensors>
bool try_vec_unary(const Fn& fn, const Tensor& out, const Tensors&... ins) {
  using Info = VecUnary<Fn>;
  const VecMathTable* vt = vec_math();
  if (vt == nullptr) return false;
  if (!(Info::kBackward ? vec_unary_backward_has(Info::op) : vec_unary_has(Info::op))) return false;
  if (!out.is_contiguous() || !(... && (ins.is_contiguous() && ins.sizes() == out.sizes()))) return false;
  float a = 0, b = 0;
  if constexpr (Info::op == OpId::softplus) {
    a = fn.f.beta;
    b = fn.f.threshold;
  }
  constexpr VecType t = vec_type_of<Out>();
  constexpr size_t kIn = sizeof...(Tensors);
  const int64_t n = out.numel();
  if (n == 0) return true;
  constexpr int64_t kBlock = 4096;
  const std::array<const Out*, kIn> in{static_cast<const Out*>(ins.data_ptr())...};
  Out* o = static_cast<Out*>(out.data_ptr());
  for_blocks(n, (n + kBlock - 1) / kBlock, [&](int64_t blk) {
    const int64_t i0 = blk * kBlock, len = std::min(kBlock, n - i0);
    if constexpr (Info::kBackward) {
      vt->unary_backward(Info::op, t, in[0] + i0, in[1] + i0, o + i0, len, a, b);
    } else {
      vt->unary(Info::op, t, in[0] + i0, o + i0, len, a, b);
    }
  });
  return true;
}

// Note [Native f16 element-wise]
// On a CPU with AVX512-FP16, contiguous f16 add, sub, mul, div, maximum,
// minimum, neg, abs, relu and sqrt run as the native kernels of
// kernels/elementwise/f16_native.h (32 f16 lanes an instruction, no widening), in
// blocks of 4096 values as the SLEEF blocks do. Each is one IEEE operation,
// so the result is bit-identical to the widening blocks above (the argument
// is in kernels/elementwise/f16_native.h). With a scalar, only where the scalar is an
// f16 value: the functor keeps the scalar in f32 (f16 * 0.1 multiplies by
// 0.1f), which no f16 operation reproduces.
template <typename Fn>
struct NativeF16 {
  static constexpr bool kHas = false;
};
template <OpId kOp>
struct NativeF16<ew::ForwardOf<half, ew::Unary<kOp, float>>> {
  static constexpr bool kHas = true, kScalar = false;
  static constexpr OpId op = kOp;
};
template <OpId kOp>
struct NativeF16<ew::BinaryOf<half, ew::Binary<kOp, float>>> {
  static constexpr bool kHas = true, kScalar = false;
  static constexpr OpId op = kOp;
};
template <OpId kOp>
struct NativeF16<ew::ScalarOf<half, ew::Binary<kOp, float>>> {
  static constexpr bool kHas = true, kScalar = true;
  static constexpr OpId op = kOp;
};

// True when it ran the op (see the note); false leaves it to the caller.
template <typename Fn, typename... Tensors>
bool try_native_f16(const Fn& fn, const Tensor& out, const Tensors&... ins) {
  const std::optional<F16Op> op = f16_native_op(NativeF16<Fn>::op);
  if (!op) return false;
  const F16NativeTable* nt = f16_native();
  if (nt == nullptr) return false;
  uint16_t s = 0;
  if constexpr (NativeF16<Fn>::kScalar) {
    s = detail::float_to_half_bits(fn.scalar);
    if (detail::half_bits_to_float(s) != fn.scalar) return false;  // not an f16 value (or NaN)
  }
  constexpr size_t kIn = sizeof...(Tensors);
  const std::array<const uint16_t*, kIn> in{static_cast<const uint16_t*>(ins.data_ptr())...};
  auto* o = static_cast<uint16_t*>(out.data_ptr());
  const int64_t n = out.numel();
  constexpr int64_t kBlock = 4096;
  for_blocks(n, (n + kBlock - 1) / kBlock, [&](int64_t blk) {
    const int64_t i0 = blk * kBlock, len = std::min(kBlock, n - i0);
    if constexpr (kIn == 2) {
      nt->binary(*op, in[0] + i0, in[1] + i0, o + i0, len);
    } else if constexpr (NativeF16<Fn>::kScalar) {
      nt->scalar(*op, in[0] + i0, s, o + i0, len);
    } else {
      nt->unary(*op, in[0] + i0, o + i0, len);
    }
  });
  return true;
}

struct CpuLoop {
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char* /*name*/, const Fn& fn, const Tensor& out, const Tensors&... ins) {
    if constexpr ((std::is_same_v<Out, float> || is_16bit_float_v<Out>)&&(std::is_same_v<In, Out> && ...) &&
                  VecUnary<Fn>::kHas) {
      if (try_vec_unary<Out>(fn, out, ins...)) return;
    }
    if constexpr (is_16bit_float_v<Out> && (std::is_same_v<In, Out> && ...) && FloatAdapter<Fn>::kHas) {
      if (g_16bit_blocks && out.is_contiguous() && (... && (ins.is_contiguous() && ins.sizes() == out.sizes()))) {
        if constexpr (NativeF16<Fn>::kHas) {
          if (try_native_f16(fn, out, ins...)) return;
        }
        map_16bit_blocks<Out>(out, fn, ins...);
        return;
      }
    }
    map_typed<Out, In...>(out, fn, ins...);
  }
};
using Engine = ew::Engine<CpuLoop>;

}  // namespace

HG_ELEMENTWISE_BACKEND_ENTRIES(Engine)  // unary, unary_backward, binary, binary_scalar, where

void copy(const Tensor& dst, const Tensor& src) { copy_strided(dst, src); }
void fill(const Tensor& dst, double value) { fill_strided(dst, value); }

}  // namespace hg::cpu
