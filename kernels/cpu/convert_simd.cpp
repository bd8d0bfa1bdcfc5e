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
#include "kernels/cpu/vec_math.h"

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

// The block sums (convert_simd.h): block by block, lane by lane.
// A block's lanes folded by the order's tree.
inline float fold_lanes(const float* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }

template <typename S, float (*Widen)(S)>
void block_sums_generic(const S* s, int64_t n, bool square, float* sums) {
  for (int64_t b = 0; b * kSumBlock < n; ++b) {
    const S* x = s + b * kSumBlock;
    const int64_t len = std::min(kSumBlock, n - b * kSumBlock);
    float lane[8] = {};
    int64_t i = 0;
    if (square) {
      for (; i + 8 <= len; i += 8) {
        for (int l = 0; l < 8; ++l) {
          const float v = Widen(x[i + l]);
          lane[l] += v * v;
        }
      }
    } else {
      for (; i + 8 <= len; i += 8) {
        for (int l = 0; l < 8; ++l) lane[l] += Widen(x[i + l]);
      }
    }
    for (; i < len; ++i) {
      const float v = Widen(x[i]);
      lane[i % 8] += square ? v * v : v;
    }
    sums[b] = fold_lanes(lane);
  }
}
void block_sums_f16_generic(const uint16_t* s, int64_t n, bool square, float* sums) {
  block_sums_generic<uint16_t, detail::half_bits_to_float>(s, n, square, sums);
}
void block_sums_bf16_generic(const uint16_t* s, int64_t n, bool square, float* sums) {
  block_sums_generic<uint16_t, detail::bfloat16_bits_to_float>(s, n, square, sums);
}
inline float same_f32(float v) { return v; }
void block_sums_f32_generic(const float* s, int64_t n, bool square, float* sums) {
  block_sums_generic<float, same_f32>(s, n, square, sums);
}

// The streams one after another.
template <typename S, void (*Sums)(const S*, int64_t, bool, float*)>
void block_sums_streams_generic(const S* const* s, const int64_t* n, int k, bool square, float* const* sums) {
  for (int j = 0; j < k; ++j) Sums(s[j], n[j], square, sums[j]);
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
HG_AVX2 inline __m256 load8_f32(const float* s) { return _mm256_loadu_ps(s); }

// Note [Eight blocks at once]
// A block's 8 lanes are one YMM register (vector i of the block holds its
// elements 8i .. 8i + 7, so lane l adds the block's elements l, l + 8, ... in
// order), and a block is 16 dependent adds of that register. Called once per
// block (the previous code: a call through the dispatch table, the lanes
// stored and folded in scalar code, then the pairwise recursion), 16-bit sums
// ran at half of PyTorch's speed. Here one loop sums eight consecutive
// blocks, one block per iteration with its 16 adds unrolled: the blocks are
// independent until the pairwise tree combines their sums, so the
// out-of-order core overlaps their chains, and the eight registers fold into
// eight block sums with a few shuffles (fold8). Within each lane the adds are
// the same, in the same order: the same bits as the portable loop.
// The loads stay in memory order: interleaving the eight blocks' loads
// (eight streams 512 bytes apart) measured about twice slower on this
// project's Zen 4 VM than reading in order, for f32 (hardware prefetch); f32
// sums take this loop too (their widening is a plain load), since they read
// several streams at once (Note [Streams]).

// Eight block registers folded into their eight block sums (result lane b =
// fold_lanes(block b's register)): pairs() adds the even and odd lanes of two blocks,
// [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]; twice gives each
// block's (l0+l1)+(l2+l3) in the low half and (l4+l5)+(l6+l7) in the high
// half, and the halves of blocks 0-3 and 4-7 meet in one last add.
HG_AVX2 inline __m256 pairs(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
HG_AVX2 inline __m256 fold8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
  const __m256 q0 = pairs(pairs(a0, a1), pairs(a2, a3));
  const __m256 q1 = pairs(pairs(a4, a5), pairs(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

template <bool kSquare>
HG_AVX2 inline __m256 term(__m256 v) {
  return kSquare ? _mm256_mul_ps(v, v) : v;
}

// One whole block at x in one register: 16 dependent adds, unrolled, so that
// the adds of the next blocks (independent chains) issue while this chain
// waits on its latency.
template <bool kSquare, typename S, __m256 (*Load8)(const S*)>
HG_AVX2 inline __m256 block_register(const S* x) {
  __m256 acc = _mm256_setzero_ps();  // from +0, as the lanes of the order (-0 + +0 is +0)
#pragma GCC unroll 16
  for (int64_t i = 0; i < kSumBlock; i += 8) acc = _mm256_add_ps(acc, term<kSquare>(Load8(x + i)));
  return acc;
}

// Eight consecutive blocks at x, read in memory order, one block per loop
// iteration (the out-of-order core overlaps the chains of consecutive
// blocks): their eight block sums to sums[0..8).
template <bool kSquare, typename S, __m256 (*Load8)(const S*)>
HG_AVX2 inline void sum8_blocks(const S* x, float* sums) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = block_register<kSquare, S, Load8>(x + j * kSumBlock);
  _mm256_storeu_ps(sums, fold8(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]));
}

// The block sums, eight full blocks at a time (Note [Eight blocks at once]);
// the last (fewer than eight) blocks one register each, their lanes stored,
// and the last block's elements past its last whole vector added to their
// lanes in scalar code after the vzeroupper. kSquare is a template argument,
// not a branch in the loop: with a branch, GCC 12 hoisted the 128 loads the
// two sides share above it and spilled them to the stack.
template <bool kSquare, typename S, __m256 (*Load8)(const S*), float (*Widen)(S)>
HG_AVX2 void block_sums_avx2(const S* s, int64_t n, float* sums) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  int64_t b = 0;
  for (; (b + 8) * kSumBlock <= n; b += 8) sum8_blocks<kSquare, S, Load8>(s + b * kSumBlock, sums + b);
  float lanes[8][8];  // blocks b .. blocks - 1 (at most 8)
  const int64_t first = b;
  int64_t i = 0;  // the elements of the last block its vectors covered
  for (; b < blocks; ++b) {
    const S* x = s + b * kSumBlock;
    const int64_t len = std::min(kSumBlock, n - b * kSumBlock);
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= len; i += 8) acc = _mm256_add_ps(acc, term<kSquare>(Load8(x + i)));
    _mm256_storeu_ps(lanes[b - first], acc);
  }
  _mm256_zeroupper();  // Note [vzeroupper before the tail]
  if (first == blocks) return;
  const int64_t last = blocks - 1, len = n - last * kSumBlock;
  for (; i < len; ++i) {
    const float v = Widen(s[last * kSumBlock + i]);
    lanes[last - first][i % 8] += kSquare ? v * v : v;
  }
  for (int64_t k = first; k < blocks; ++k) sums[k] = fold_lanes(lanes[k - first]);
}
HG_AVX2 void block_sums_f16_avx2(const uint16_t* s, int64_t n, bool square, float* sums) {
  if (square) {
    block_sums_avx2<true, uint16_t, widen8_f16, detail::half_bits_to_float>(s, n, sums);
  } else {
    block_sums_avx2<false, uint16_t, widen8_f16, detail::half_bits_to_float>(s, n, sums);
  }
}
HG_AVX2 void block_sums_bf16_avx2(const uint16_t* s, int64_t n, bool square, float* sums) {
  if (square) {
    block_sums_avx2<true, uint16_t, widen8_bf16, detail::bfloat16_bits_to_float>(s, n, sums);
  } else {
    block_sums_avx2<false, uint16_t, widen8_bf16, detail::bfloat16_bits_to_float>(s, n, sums);
  }
}

// Note [Streams]
// One core reading one sequential stream got about 30 GB/s here (a plain
// AVX2 sum of 64 MiB of floats, and the block sums above: 1.4 ms for 16Mi
// f16 values with the caches flushed), PyTorch's sums the same; reading four
// streams far apart (different rows, or different subtrees of one long
// row), 2 KiB of each in turn, about 1.5x that (0.85-0.9 ms for the same
// values; two streams 0.94-1.0 ms, eight 1.0-1.1 ms; measured on this
// project's 2-core Zen 4 VM under load, the best of 30 calls): the hardware
// prefetcher keeps more lines in flight for several streams than for one.
// So block_sums_streams takes up to kSumStreams independent arrays and
// sums eight blocks (1,024 values, 2 KiB of 16-bit or 4 KiB of f32) of each
// in turn, while all have eight whole blocks left; then each stream's rest
// alone. Each block is summed by the same code as in block_sums_avx2, so
// each stream gets the same bits as alone, and as the portable loop.
// An AVX-512 loop was tried and left out: on this Zen 4 (512-bit operations
// split in two 256-bit halves) a ZMM read loop was no faster than the YMM
// one (1.0 against 0.99 ms for 32 MiB), and two blocks per ZMM register
// (lanes 0-7 block b, 8-15 block b + 1, the same per-lane order) needed an
// insert per load and ran slower than eight YMM blocks with the data in L1
// (1.0 against 0.7 us for 16Ki f16 values).
template <bool kSquare, typename S, __m256 (*Load8)(const S*), float (*Widen)(S)>
HG_AVX2 void streams_avx2(const S* const* s, const int64_t* n, int k, float* const* sums) {
  if (k <= 0) return;
  constexpr int64_t kGroup = 8 * kSumBlock;
  int64_t groups = n[0] / kGroup;  // eight-block groups every stream has
  for (int j = 1; j < k; ++j) groups = std::min(groups, n[j] / kGroup);
  for (int64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < k; ++j) sum8_blocks<kSquare, S, Load8>(s[j] + g * kGroup, sums[j] + g * 8);
  }
  for (int j = 0; j < k; ++j) {  // ends with a vzeroupper (Note [vzeroupper before the tail])
    block_sums_avx2<kSquare, S, Load8, Widen>(s[j] + groups * kGroup, n[j] - groups * kGroup, sums[j] + groups * 8);
  }
}
template <typename S, __m256 (*Load8)(const S*), float (*Widen)(S)>
HG_AVX2 void block_sums_streams_avx2(const S* const* s, const int64_t* n, int k, bool square, float* const* sums) {
  if (square) {
    streams_avx2<true, S, Load8, Widen>(s, n, k, sums);
  } else {
    streams_avx2<false, S, Load8, Widen>(s, n, k, sums);
  }
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
  void (*block_sums_f16)(const uint16_t*, int64_t, bool, float*);
  void (*block_sums_bf16)(const uint16_t*, int64_t, bool, float*);
  void (*streams_f32)(const float* const*, const int64_t*, int, bool, float* const*);
  void (*streams_f16)(const uint16_t* const*, const int64_t*, int, bool, float* const*);
  void (*streams_bf16)(const uint16_t* const*, const int64_t*, int, bool, float* const*);
};

constexpr auto streams_f32_generic = block_sums_streams_generic<float, block_sums_f32_generic>;
constexpr auto streams_f16_generic = block_sums_streams_generic<uint16_t, block_sums_f16_generic>;
constexpr auto streams_bf16_generic = block_sums_streams_generic<uint16_t, block_sums_bf16_generic>;

const Table& table() {
  static const Table t = [] {
    const char* force = std::getenv("HG_CPU_ISA");
    const bool generic = force != nullptr && std::strcmp(force, "generic") == 0;
#if defined(HG_X86_DISPATCH)
    if (!generic && cpu_has_avx2_f16c()) {
      return Table{"avx2-f16c",
                   widen_f16_avx2,
                   widen_bf16_avx2,
                   narrow_f16_avx2,
                   narrow_bf16_avx2,
                   block_sums_f16_avx2,
                   block_sums_bf16_avx2,
                   block_sums_streams_avx2<float, load8_f32, same_f32>,
                   block_sums_streams_avx2<uint16_t, widen8_f16, detail::half_bits_to_float>,
                   block_sums_streams_avx2<uint16_t, widen8_bf16, detail::bfloat16_bits_to_float>};
    }
#endif
    (void)generic;
    return Table{"generic",           widen_f16_generic,      widen_bf16_generic,      narrow_f16_generic,
                 narrow_bf16_generic, block_sums_f16_generic, block_sums_bf16_generic, streams_f32_generic,
                 streams_f16_generic, streams_bf16_generic};
  }();
  return t;
}

}  // namespace

const char* convert_isa() { return table().isa; }
void widen_f16(const uint16_t* s, float* d, int64_t n) { table().widen_f16(s, d, n); }
void widen_bf16(const uint16_t* s, float* d, int64_t n) { table().widen_bf16(s, d, n); }
void narrow_f16(const float* s, uint16_t* d, int64_t n) { table().narrow_f16(s, d, n); }
void narrow_bf16(const float* s, uint16_t* d, int64_t n) { table().narrow_bf16(s, d, n); }
// The block sums: the portable loop also while the vector math is capped at
// SSE2 (convert_simd.h).
void block_sums_f16(const uint16_t* s, int64_t n, bool square, float* sums) {
  (cpu_isa_cap() == VecIsa::sse2 ? block_sums_f16_generic : table().block_sums_f16)(s, n, square, sums);
}
void block_sums_bf16(const uint16_t* s, int64_t n, bool square, float* sums) {
  (cpu_isa_cap() == VecIsa::sse2 ? block_sums_bf16_generic : table().block_sums_bf16)(s, n, square, sums);
}
void block_sums_streams_f32(const float* const* s, const int64_t* n, int k, bool square, float* const* sums) {
  (cpu_isa_cap() == VecIsa::sse2 ? streams_f32_generic : table().streams_f32)(s, n, k, square, sums);
}
void block_sums_streams_f16(const uint16_t* const* s, const int64_t* n, int k, bool square, float* const* sums) {
  (cpu_isa_cap() == VecIsa::sse2 ? streams_f16_generic : table().streams_f16)(s, n, k, square, sums);
}
void block_sums_streams_bf16(const uint16_t* const* s, const int64_t* n, int k, bool square, float* const* sums) {
  (cpu_isa_cap() == VecIsa::sse2 ? streams_bf16_generic : table().streams_bf16)(s, n, k, square, sums);
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
