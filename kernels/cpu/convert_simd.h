// Row conversions between 16-bit floats and f32 for the CPU GEMM's widen and
// round steps, and the block sums of the CPU reductions (f32 and 16-bit),
// with run-time ISA dispatch (kernels/cpu/README.md, "Converters").
//
// The library is built for generic x86-64 so that the installed binary runs on
// any x86-64 CPU; these few hot loops are compiled a second time for
// AVX2 + F16C through GCC/clang function target attributes and chosen once,
// at first use, from CPUID. HG_CPU_ISA=generic forces the portable loops
// (the tests run both). Both paths are bit-identical to core/half.h's
// conversions: f16 by the F16C instructions (round-to-nearest-even, NaN
// payload kept and quieted), bf16 by the same integer rounding.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace hg::cpu {

// True for the 16-bit float types the row converters take.
template <typename T>
constexpr bool is_16bit_float_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// "avx2-f16c" or "generic": the path the conversions take in this process.
const char* convert_isa();

// dst[i] = float(src[i]) for n 16-bit values (bits of half / bfloat16).
void widen_f16(const uint16_t* src, float* dst, int64_t n);
void widen_bf16(const uint16_t* src, float* dst, int64_t n);
// dst[i] = round-to-nearest-even(src[i]).
void narrow_f16(const float* src, uint16_t* dst, int64_t n);
void narrow_bf16(const float* src, uint16_t* dst, int64_t n);

// The block sums of the CPU reductions' float summation order (kernels/reduce/reduce_cpu.cpp,
// kernels/reduce/README.md "Float sums"): the n values split into nb = ceil(n / 128)
// consecutive blocks of kSumBlock (the last one may be shorter); in block b,
// lane l (0..7) = sum over the block's i = l (mod 8) of f(x[i]), from +0 left
// to right, f(v) = v, or v * v when square (a multiply, then an add: no fused
// multiply-add); sums[b] = ((lane0 + lane1) + (lane2 + lane3)) + ((lane4 +
// lane5) + (lane6 + lane7)). sums holds nb floats. 16-bit values are widened
// to f32 exactly.
//
// The vector path (AVX2 + F16C) sums eight consecutive blocks per loop step,
// one YMM register per block (its lanes are the block's 8 lanes), whose
// independent dependency chains the out-of-order core overlaps, and folds the
// eight registers into eight block sums with the same tree (Note [Eight
// blocks at once] in convert_simd.cpp); the portable path sums block by block. Both
// give the same bits. The portable path runs under HG_CPU_ISA=generic (read
// once, as for the converters above) and also while the vector math is capped
// at SSE2 (cpu::set_cpu_isa_cap(VecIsa::sse2), kernels/cpu/vec_math.h), so a
// test can compare the two in one process.
inline constexpr int64_t kSumBlock = 128;
void block_sums_f16(const uint16_t* src, int64_t n, bool square, float* sums);
void block_sums_bf16(const uint16_t* src, int64_t n, bool square, float* sums);

// The block sums of k <= kSumStreams independent arrays (streams) at once:
// stream j's n[j] values src[j] to its ceil(n[j] / 128) block sums sums[j],
// each stream's sums exactly those of block_sums above (f32 arrays: the same
// order on float values, no widening). The vector path reads the streams
// round-robin, eight blocks of one stream after another (Note [Streams] in
// convert_simd.cpp): one core then keeps several memory streams in flight,
// which a long sum needs to read at more than one stream's bandwidth. The
// portable path runs stream after stream.
inline constexpr int kSumStreams = 4;
void block_sums_streams_f32(const float* const* src, const int64_t* n, int k, bool square, float* const* sums);
void block_sums_streams_f16(const uint16_t* const* src, const int64_t* n, int k, bool square, float* const* sums);
void block_sums_streams_bf16(const uint16_t* const* src, const int64_t* n, int k, bool square, float* const* sums);

// The same for a 16-bit type T (half or bfloat16), chosen at compile time.
template <typename T>
void widen_row(const T* src, float* dst, int64_t n) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>);
  if constexpr (std::is_same_v<T, half>)
    widen_f16(reinterpret_cast<const uint16_t*>(src), dst, n);
  else
    widen_bf16(reinterpret_cast<const uint16_t*>(src), dst, n);
}
template <typename T>
void narrow_row(const float* src, T* dst, int64_t n) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>);
  if constexpr (std::is_same_v<T, half>)
    narrow_f16(src, reinterpret_cast<uint16_t*>(dst), n);
  else
    narrow_bf16(src, reinterpret_cast<uint16_t*>(dst), n);
}

// block_sums_streams for T = float, half or bfloat16.
template <typename T>
void block_sums_streams(const T* const* src, const int64_t* n, int k, bool square, float* const* sums) {
  static_assert(std::is_same_v<T, float> || is_16bit_float_v<T>);
  if constexpr (std::is_same_v<T, float>)
    block_sums_streams_f32(src, n, k, square, sums);
  else if constexpr (std::is_same_v<T, half>)
    block_sums_streams_f16(reinterpret_cast<const uint16_t* const*>(src), n, k, square, sums);
  else
    block_sums_streams_bf16(reinterpret_cast<const uint16_t* const*>(src), n, k, square, sums);
}

template <typename T>
void block_sums(const T* src, int64_t n, bool square, float* sums) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>);
  if constexpr (std::is_same_v<T, half>)
    block_sums_f16(reinterpret_cast<const uint16_t*>(src), n, square, sums);
  else
    block_sums_bf16(reinterpret_cast<const uint16_t*>(src), n, square, sums);
}

}  // namespace hg::cpu
