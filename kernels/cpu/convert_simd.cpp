// Run-time dispatched 16-bit <-> f32 row conversions (kernels/cpu/convert_simd.h).
#include "kernels/cpu/convert_simd.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/copy.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/cpu/loops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HG_X86_DISPATCH 1
#endif

namespace hg::cpu {

namespace {

void widen_f16_generic(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = detail::half_bits_to_float(s[i]);
}
void widen_bf16_generic(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = detail::bfloat16_bits_to_float(s[i]);
}
void narrow_f16_generic(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = detail::float_to_half_bits(s[i]);
}
void narrow_bf16_generic(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = detail::float_to_bfloat16_bits(s[i]);
}

template <float (*Widen)(uint16_t)>
void lane_sums_generic(const uint16_t* s, int64_t n, bool square, float* lane) {
  for (int l = 0; l < 8; ++l) lane[l] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = Widen(s[i]);
    lane[i % 8] += square ? v * v : v;
  }
}
void lane_sums_f16_generic(const uint16_t* s, int64_t n, bool square, float* lane) {
  lane_sums_generic<detail::half_bits_to_float>(s, n, square, lane);
}
void lane_sums_bf16_generic(const uint16_t* s, int64_t n, bool square, float* lane) {
  lane_sums_generic<detail::bfloat16_bits_to_float>(s, n, square, lane);
}

#if defined(HG_X86_DISPATCH)
#define HG_AVX2 __attribute__((target("avx2,f16c")))

// Note [vzeroupper before the tail]
// Each AVX2 loop below ends by calling the portable loop for the last n % 8
// elements. GCC 12 compiles that call as a tail jump and emits no vzeroupper
// before it, so the thread went back to the (non-VEX, baseline x86-64) rest
// of the library with the upper halves of the YMM registers in use. On this
// project's AMD EPYC (Zen 4, in a VM) every later SSE instruction that writes
// such a register then pays a merge with the stale upper half: after one bf16
// GEMM, softmax_rows and glibc's expf took 2.6x the CPU time for the rest of
// the process (hg-bench: 0.16 -> 0.42 s per 4096x4096 softmax; a C reproducer
// with one dirty YMM register: a scalar SSE loop 6x slower, expf 2.6x). The
// explicit _mm256_zeroupper() restores the clean state on every path; the
// test "the AVX2 converters return with the upper YMM state clean" checks it
// through XGETBV(1) (XINUSE).

HG_AVX2 void widen_f16_avx2(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  }
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  widen_f16_generic(s + i, d + i, n - i);
}

HG_AVX2 void widen_bf16_avx2(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  widen_bf16_generic(s + i, d + i, n - i);
}

HG_AVX2 void narrow_f16_avx2(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  narrow_f16_generic(s + i, d + i, n - i);
}

// core/half.h's float_to_bfloat16_bits, eight at a time: NaN -> (x >> 16) | 0x40,
// else (x + 0x7fff + lsb) >> 16.
HG_AVX2 void narrow_bf16_avx2(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
    const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    // Pack the 32-bit lanes (all < 2^16) to 16 bits, undoing the lane interleave.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  narrow_bf16_generic(s + i, d + i, n - i);
}

// Eight 16-bit values widened in a YMM register.
HG_AVX2 inline __m256 widen8_f16(const uint16_t* s) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
}
HG_AVX2 inline __m256 widen8_bf16(const uint16_t* s) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// One YMM register holds the 8 lanes: vector i's lane l is element 8i + l,
// so each lane adds its elements in order, as the generic loop does.
template <__m256 (*Widen8)(const uint16_t*), float (*Widen)(uint16_t)>
HG_AVX2 void lane_sums_avx2(const uint16_t* s, int64_t n, bool square, float* lane) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  if (square) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = Widen8(s + i);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(v, v));
    }
  } else {
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, Widen8(s + i));
  }
  _mm256_storeu_ps(lane, acc);
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  for (; i < n; ++i) {
    const float v = Widen(s[i]);
    lane[i % 8] += square ? v * v : v;
  }
}
HG_AVX2 void lane_sums_f16_avx2(const uint16_t* s, int64_t n, bool square, float* lane) {
  lane_sums_avx2<widen8_f16, detail::half_bits_to_float>(s, n, square, lane);
}
HG_AVX2 void lane_sums_bf16_avx2(const uint16_t* s, int64_t n, bool square, float* lane) {
  lane_sums_avx2<widen8_bf16, detail::bfloat16_bits_to_float>(s, n, square, lane);
}

bool cpu_has_avx2_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool f16c = (c >> 29) & 1, avx = (c >> 28) & 1, osxsave = (c >> 27) & 1;
  if (!(f16c && avx && osxsave)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6) != 0x6) return false;  // the OS saves the YMM state
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b >> 5) & 1;  // AVX2
}
#endif

struct Table {
  const char* isa;
  void (*widen_f16)(const uint16_t*, float*, int64_t);
  void (*widen_bf16)(const uint16_t*, float*, int64_t);
  void (*narrow_f16)(const float*, uint16_t*, int64_t);
  void (*narrow_bf16)(const float*, uint16_t*, int64_t);
  void (*lane_sums_f16)(const uint16_t*, int64_t, bool, float*);
  void (*lane_sums_bf16)(const uint16_t*, int64_t, bool, float*);
};

const Table& table() {
  static const Table t = [] {
    const char* force = std::getenv("HG_CPU_ISA");
    const bool generic = force != nullptr && std::strcmp(force, "generic") == 0;
#if defined(HG_X86_DISPATCH)
    if (!generic && cpu_has_avx2_f16c()) {
      return Table{"avx2-f16c",      widen_f16_avx2,     widen_bf16_avx2,    narrow_f16_avx2,
                   narrow_bf16_avx2, lane_sums_f16_avx2, lane_sums_bf16_avx2};
    }
#endif
    (void)generic;
    return Table{"generic",           widen_f16_generic,     widen_bf16_generic,    narrow_f16_generic,
                 narrow_bf16_generic, lane_sums_f16_generic, lane_sums_bf16_generic};
  }();
  return t;
}

}  // namespace

const char* convert_isa() { return table().isa; }
void widen_f16(const uint16_t* s, float* d, int64_t n) { table().widen_f16(s, d, n); }
void widen_bf16(const uint16_t* s, float* d, int64_t n) { table().widen_bf16(s, d, n); }
void narrow_f16(const float* s, uint16_t* d, int64_t n) { table().narrow_f16(s, d, n); }
void narrow_bf16(const float* s, uint16_t* d, int64_t n) { table().narrow_bf16(s, d, n); }
void lane_sums_f16(const uint16_t* s, int64_t n, bool square, float lane[8]) {
  table().lane_sums_f16(s, n, square, lane);
}
void lane_sums_bf16(const uint16_t* s, int64_t n, bool square, float lane[8]) {
  table().lane_sums_bf16(s, n, square, lane);
}

namespace {

// core/copy.h's CPU conversion hook: contiguous f32 <-> f16/bf16 through the
// row converters above (bit-identical to convert_value), in blocks over the
// threads. Autocast's per-step casts of weights and gradients take this path.
bool convert_contiguous(const Tensor& dst, const Tensor& src) {
  using Widen = void (*)(const uint16_t*, float*, int64_t);
  using Narrow = void (*)(const float*, uint16_t*, int64_t);
  Widen widen = nullptr;
  Narrow narrow = nullptr;
  if (dst.dtype() == kF32 && src.dtype() == kF16) widen = widen_f16;
  if (dst.dtype() == kF32 && src.dtype() == kBF16) widen = widen_bf16;
  if (dst.dtype() == kF16 && src.dtype() == kF32) narrow = narrow_f16;
  if (dst.dtype() == kBF16 && src.dtype() == kF32) narrow = narrow_bf16;
  if (widen == nullptr && narrow == nullptr) return false;
  const int64_t n = dst.numel();
  constexpr int64_t kBlock = 1 << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, blocks > 4, [&](int64_t b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    if (widen != nullptr) {
      widen(static_cast<const uint16_t*>(src.data_ptr()) + i0, static_cast<float*>(dst.data_ptr()) + i0, len);
    } else {
      narrow(static_cast<const float*>(src.data_ptr()) + i0, static_cast<uint16_t*>(dst.data_ptr()) + i0, len);
    }
  });
  return true;
}

const bool g_convert_registered = [] {
  register_cpu_convert_kernel(convert_contiguous);
  return true;
}();

}  // namespace

}  // namespace hg::cpu
