// Philox4x32-10 counter-based RNG and the element mapping every random fill
// uses, on the host, in the cuda-emu build and on the GPU.
//
// Philox (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11)
// is a keyed bijection: 128-bit counter + 64-bit key -> 128 random bits. There
// is no state to carry between elements, so element i of a fill can be
// computed by whichever thread owns it, in any order, with the same result.
//
// Note [Philox element mapping]
// A fill with (seed, offset) gives element i (a flat index into the output,
// i >= 0) the bits of lane i % 4 of block b = i / 4, where
//   counter = {lo32(b), hi32(b), lo32(offset), hi32(offset)}
//   key     = {lo32(seed), hi32(seed)}.
// A fill therefore owns the stream of 2^64 blocks selected by `offset`; the
// Generator hands out one fresh offset per fill (core/generator.h), so two
// fills never share a block. CUDA kernels must use exactly this mapping (call
// the helpers below, or philox_block + the *_from_bits helpers to produce four
// elements per call), which makes a CPU fill and a CUDA fill with the same
// (seed, offset) produce the same numbers.
//
// Note [Portable Box-Muller]
// philox_normal_at pairs lanes (0,1) and (2,3) of a block: u1 in (0,1] from the
// even lane, u2 in [0,1) from the odd lane, r = sqrt(-2 log u1), and the even
// lane gets r cos(2 pi u2), the odd lane r sin(2 pi u2).
// We do not call logf/cosf/sinf: glibc and CUDA's libdevice differ by an ulp
// or two, and computing in double then rounding is slow on GPUs without
// full-rate fp64 and still differs in rare rounding cases. Instead the log and
// the sin/cos below are short polynomials built only from operations IEEE 754
// rounds correctly everywhere (fma, mul, add, div, sqrt). On the device they
// are the __f*_rn intrinsics, which nvcc never contracts or approximates (the
// PTX stays fma.rn/div.rn/sqrt.rn even under --use_fast_math, and no
// intermediate is subnormal, so its flush-to-zero changes nothing); on the
// host every multiply-add is an explicit std::fma, so -ffp-contract cannot
// fuse differently. Rule for editing them: never feed a plain product into a
// plain add. Result: uniforms AND normals are bit-identical on cpu, cuda-emu
// and a real GPU, so CUDA randn can be tested against CPU randn exactly.
// Accuracy against double libm (tests/core/test_philox.cpp): log 1.4 ulp,
// sin/cos 1.5 * 2^-24 absolute, z within 2.7 * 2^-24 of r: statistically
// invisible. Cost: ~30 fp32 operations and one division per pair.
// Range: u1 >= 2^-24 bounds |z| <= sqrt(48 ln 2) ~= 5.77, as with every
// 24-bit-uniform Box-Muller (cuRAND has the same tail cut).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"  // detail::float_bits
#include "core/macros.h"

namespace hg {

// 128 random bits: the output of one Philox block.
struct Philox4x32Out {
  uint32_t x[4];
};

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // key schedule (golden ratio)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // key schedule (sqrt(3) - 1)

namespace detail {

HG_HOST_DEVICE inline void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
#endif
}

// One Philox S-box round: two 32x32->64 multiplies, xor with the key.
HG_HOST_DEVICE inline void philox4x32_round(uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t hi0, lo0, hi1, lo1;
  mulhilo32(kPhiloxM0, ctr[0], &hi0, &lo0);
  mulhilo32(kPhiloxM1, ctr[2], &hi1, &lo1);
  const uint32_t c1 = ctr[1];
  const uint32_t c3 = ctr[3];
  ctr[0] = hi1 ^ c1 ^ key[0];
  ctr[1] = lo1;
  ctr[2] = hi0 ^ c3 ^ key[1];
  ctr[3] = lo0;
}

}  // namespace detail

// Philox4x32 with kRounds rounds (10 is the standard, Crush-resistant choice;
// other counts exist only so the test can check Random123's 7-round vectors).
template <int kRounds>
HG_HOST_DEVICE inline Philox4x32Out philox4x32(const uint32_t counter[4], const uint32_t key[2]) {
  uint32_t ctr[4] = {counter[0], counter[1], counter[2], counter[3]};
  uint32_t k[2] = {key[0], key[1]};
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {  // the key is bumped before every round but the first
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    detail::philox4x32_round(ctr, k);
  }
  return Philox4x32Out{{ctr[0], ctr[1], ctr[2], ctr[3]}};
}

HG_HOST_DEVICE inline Philox4x32Out philox4x32_10(const uint32_t counter[4], const uint32_t key[2]) {
  return philox4x32<10>(counter, key);
}

// Block `block` of the stream (seed, offset); see Note [Philox element mapping].
HG_HOST_DEVICE inline Philox4x32Out philox_block(uint64_t seed, uint64_t offset, uint64_t block) {
  const uint32_t counter[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                               static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  return philox4x32_10(counter, key);
}

// The 32 random bits of element i of the fill (seed, offset).
HG_HOST_DEVICE inline uint32_t philox_bits_at(uint64_t seed, uint64_t offset, uint64_t i) {
  return philox_block(seed, offset, i / 4).x[i % 4];
}

// Uniform in [0, 1) from the top 24 bits: every value is a multiple of 2^-24,
// exactly representable as a float, so no rounding can produce 1.0f.
HG_HOST_DEVICE inline float uniform_from_bits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

// Uniform in (0, 1]: the same grid shifted by one step, so log() is finite.
HG_HOST_DEVICE inline float uniform_open_closed_from_bits(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1u) * 0x1p-24f;
}

namespace detail {

// Correctly rounded float operations that no compiler may fuse or approximate.
// See Note [Portable Box-Muller].
HG_HOST_DEVICE inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
HG_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HG_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HG_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
HG_HOST_DEVICE inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// log(u) for a positive normal float u <= 1 (Box-Muller only needs (0, 1]).
// fdlibm's scheme: u = (1 + f) 2^e with 1 + f in [sqrt(1/2), sqrt(2)),
// s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R(s^2))),
// R = 2/3 s^2 + 2/5 s^4 + ... (|s| <= 0.172: the series to s^10 is accurate
// to 1e-10). Writing it as f minus a small correction keeps the rounding of s
// out of the leading term: the result is within ~1 ulp.
HG_HOST_DEVICE inline float portable_log_unit(float u) {
  const uint32_t bits = float_bits(u);
  int e = static_cast<int>(bits >> 23) - 127;
  uint32_t m_bits = (bits & 0x7fffffu) | 0x3f800000u;  // 1 + f in [1, 2)
  if (m_bits > 0x3fb504f3u) {                          // above sqrt(2): halve it
    m_bits -= 0x00800000u;
    ++e;
  }
  const float f = add_rn(bits_float(m_bits), -1.0f);  // exact (Sterbenz)
  const float s = div_rn(f, add_rn(f, 2.0f));
  const float z = mul_rn(s, s);
  float r = 0.181818187f;          // R / z as a polynomial in z: 2/11 ...
  r = fma_rn(r, z, 0.222222224f);  // 2/9
  r = fma_rn(r, z, 0.285714298f);  // 2/7
  r = fma_rn(r, z, 0.400000006f);  // 2/5
  r = fma_rn(r, z, 0.666666687f);  // 2/3
  const float half_f_sq = mul_rn(0.5f, mul_rn(f, f));
  const float half_f_sq_plus_r = fma_rn(r, z, half_f_sq);  // f^2/2 + R
  const float correction = fma_rn(-s, half_f_sq_plus_r, half_f_sq);
  const float log_m = add_rn(f, -correction);
  // ln 2 split so that e * kLn2Hi is exact (kLn2Hi has 16 significant bits).
  constexpr float kLn2Hi = 0.693145752f;
  constexpr float kLn2Lo = 1.42860677e-06f;
  const float e_f = static_cast<float>(e);
  return fma_rn(e_f, kLn2Hi, fma_rn(e_f, kLn2Lo, log_m));
}

// sin and cos of 2 pi k / 2^24 for an integer k in [0, 2^24). The reduction is
// integer arithmetic: 2 pi k / 2^24 = (pi/2) (n + a), n = round(k / 2^22),
// a in [-1/2, 1/2]; then Taylor polynomials in a (error < 2e-9 at |a| = 1/2).
HG_HOST_DEVICE inline void portable_sincos_2pi(uint32_t k, float* sin_out, float* cos_out) {
  const uint32_t n = (k + (1u << 21)) >> 22;  // quadrant, 0..4
  const int32_t rem = static_cast<int32_t>(k) - static_cast<int32_t>(n << 22);
  const float a = static_cast<float>(rem) * 0x1p-22f;  // exact
  const float a2 = mul_rn(a, a);
  float sp = 0.000160441181f;  // (pi/2)^9 / 9!
  sp = fma_rn(sp, a2, -0.00468175393f);
  sp = fma_rn(sp, a2, 0.0796926245f);
  sp = fma_rn(sp, a2, -0.645964086f);
  sp = fma_rn(sp, a2, 1.57079637f);  // pi/2
  const float s = mul_rn(sp, a);
  float c = -2.52020418e-05f;  // -(pi/2)^10 / 10!
  c = fma_rn(c, a2, 0.000919260259f);
  c = fma_rn(c, a2, -0.0208634809f);
  c = fma_rn(c, a2, 0.2536695f);
  c = fma_rn(c, a2, -1.23370051f);
  c = fma_rn(c, a2, 1.0f);
  switch (n & 3u) {  // rotate by n quarter turns
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
  }
}

}  // namespace detail

// Box-Muller on one lane pair: bits_even gives u1 in (0,1], bits_odd gives u2.
// *z_even = r cos(2 pi u2), *z_odd = r sin(2 pi u2). See Note [Portable Box-Muller].
HG_HOST_DEVICE inline void normal_pair_from_bits(uint32_t bits_even, uint32_t bits_odd,
                                                 float* z_even, float* z_odd) {
  const float u1 = uniform_open_closed_from_bits(bits_even);
  const float r = detail::sqrt_rn(detail::mul_rn(-2.0f, detail::portable_log_unit(u1)));
  float sin_t, cos_t;
  detail::portable_sincos_2pi(bits_odd >> 8, &sin_t, &cos_t);
  *z_even = detail::mul_rn(r, cos_t);
  *z_odd = detail::mul_rn(r, sin_t);
}

// Element i of a uniform [0, 1) fill with (seed, offset).
HG_HOST_DEVICE inline float philox_uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  return uniform_from_bits(philox_bits_at(seed, offset, i));
}

// Element i of a standard normal fill with (seed, offset). Computes the whole
// lane pair; a kernel that writes four elements per thread should instead call
// philox_block once and normal_pair_from_bits twice.
HG_HOST_DEVICE inline float philox_normal_at(uint64_t seed, uint64_t offset, uint64_t i) {
  const Philox4x32Out block = philox_block(seed, offset, i / 4);
  const uint32_t even = static_cast<uint32_t>(i % 4) & ~1u;
  float z_even, z_odd;
  normal_pair_from_bits(block.x[even], block.x[even + 1], &z_even, &z_odd);
  return (i % 2 == 0) ? z_even : z_odd;
}

}  // namespace hg
