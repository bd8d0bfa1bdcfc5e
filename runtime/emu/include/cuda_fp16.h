// cuda-emu stand-in for CUDA's cuda_fp16.h: __half, __half2 and the intrinsics
// kernels use, built on hg::half's conversions (core/half.h) so the emulator and
// the host agree bit for bit. Arithmetic rounds like the GPU: see
// Note [Emulated 16-bit arithmetic] in hg_emu_float16.h.
//
// The class interface mirrors the real one on purpose, including its implicit
// conversions to and from the integer types: code such as `h * 2.0f` is
// ambiguous with nvcc, and it is ambiguous here too, so the emu build rejects
// what the gpu build would.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hg_emu_float16.h"
#include "vector_types.h"

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

struct __half;
__half __float2half(float f);
__half __double2half(double d);
float __half2float(__half h);

// may_alias: kernels view the same bytes as __half, hg::half, uint16_t, uint4.
struct __attribute__((may_alias, aligned(2))) __half {
 protected:
  unsigned short __x;

 public:
  __half() = default;
  constexpr __half(const __half_raw& raw) : __x(raw.x) {}  // NOLINT
  __half& operator=(const __half_raw& raw) {
    __x = raw.x;
    return *this;
  }
  operator __half_raw() const { return __half_raw{__x}; }  // NOLINT

  __half(float f) : __x(hg::detail::float_to_half_bits(f)) {}         // NOLINT
  __half(double d) : __x(hg::emu::detail::double_to_half_bits(d)) {}  // NOLINT
  __half(short v) : __half(static_cast<float>(v)) {}                  // NOLINT
  __half(unsigned short v) : __half(static_cast<float>(v)) {}         // NOLINT
  __half(int v) : __half(static_cast<double>(v)) {}                   // NOLINT
  __half(unsigned int v) : __half(static_cast<double>(v)) {}          // NOLINT
  __half(long v) : __half(static_cast<double>(v)) {}                  // NOLINT
  __half(unsigned long v) : __half(static_cast<double>(v)) {}         // NOLINT
  __half(long long v) : __half(static_cast<double>(v)) {}             // NOLINT
  __half(unsigned long long v) : __half(static_cast<double>(v)) {}    // NOLINT
  __half& operator=(float f) { return *this = __half(f); }
  __half& operator=(double d) { return *this = __half(d); }

  operator float() const { return hg::detail::half_bits_to_float(__x); }  // NOLINT
  // Integer conversions truncate toward zero and saturate (CUDA's *_rz).
#define HG_EMU_HALF_TO_INT(T)                                                                            \
  operator T() const {                                                                                   \
    return hg::emu::detail::float_to_int_saturate<T>(float(*this), hg::emu::detail::IntRounding::kZero); \
  }
  HG_EMU_HALF_TO_INT(signed char)
  HG_EMU_HALF_TO_INT(unsigned char)
  HG_EMU_HALF_TO_INT(char)
  HG_EMU_HALF_TO_INT(short)
  HG_EMU_HALF_TO_INT(unsigned short)
  HG_EMU_HALF_TO_INT(int)
  HG_EMU_HALF_TO_INT(unsigned int)
  HG_EMU_HALF_TO_INT(long)
  HG_EMU_HALF_TO_INT(unsigned long)
  HG_EMU_HALF_TO_INT(long long)
  HG_EMU_HALF_TO_INT(unsigned long long)
#undef HG_EMU_HALF_TO_INT
  explicit operator bool() const { return (__x & 0x7fffu) != 0; }
};

struct __attribute__((may_alias, aligned(4))) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __half2(const __half2_raw& raw) : x(__half_raw{raw.x}), y(__half_raw{raw.y}) {}  // NOLINT
  __half2& operator=(const __half2_raw& raw) { return *this = __half2(raw); }
  operator __half2_raw() const {  // NOLINT
    return __half2_raw{__half_raw(x).x, __half_raw(y).x};
  }
};

typedef __half half;
typedef __half2 half2;
typedef __half __nv_half;
typedef __half2 __nv_half2;

static_assert(sizeof(__half) == 2 && sizeof(__half2) == 4, "__half layout must match CUDA");

// ---- conversions ----------------------------------------------------------------
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline unsigned short __half_as_ushort(__half h) { return __half_raw(h).x; }
inline short __half_as_short(__half h) { return static_cast<short>(__half_raw(h).x); }
inline __half __ushort_as_half(unsigned short u) { return __half_raw{u}; }
inline __half __short_as_half(short s) { return __half_raw{static_cast<unsigned short>(s)}; }
inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }

#define HG_EMU_HALF_INT_CONV(suffix, T, mode)                                                       \
  inline T __half2##suffix(__half h) {                                                              \
    return hg::emu::detail::float_to_int_saturate<T>(float(h), hg::emu::detail::IntRounding::mode); \
  }
HG_EMU_HALF_INT_CONV(int_rn, int, kNearest)
HG_EMU_HALF_INT_CONV(int_rz, int, kZero)
HG_EMU_HALF_INT_CONV(int_rd, int, kDown)
HG_EMU_HALF_INT_CONV(int_ru, int, kUp)
HG_EMU_HALF_INT_CONV(uint_rn, unsigned int, kNearest)
HG_EMU_HALF_INT_CONV(uint_rz, unsigned int, kZero)
HG_EMU_HALF_INT_CONV(short_rn, short, kNearest)
HG_EMU_HALF_INT_CONV(short_rz, short, kZero)
HG_EMU_HALF_INT_CONV(ll_rn, long long, kNearest)
HG_EMU_HALF_INT_CONV(ll_rz, long long, kZero)
#undef HG_EMU_HALF_INT_CONV
inline __half __int2half_rn(int i) { return __half(i); }
inline __half __uint2half_rn(unsigned int i) { return __half(i); }
inline __half __short2half_rn(short i) { return __half(i); }
inline __half __ushort2half_rn(unsigned short i) { return __half(i); }
inline __half __ll2half_rn(long long i) { return __half(i); }
inline __half __ull2half_rn(unsigned long long i) { return __half(i); }

// ---- arithmetic (correctly rounded, see Note [Emulated 16-bit arithmetic]) -------
inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half __hneg(__half a) { return __ushort_as_half(__half_as_ushort(a) ^ 0x8000u); }
inline __half __habs(__half a) { return __ushort_as_half(__half_as_ushort(a) & 0x7fffu); }
inline __half __hfma(__half a, __half b, __half c) {
  return __half_raw{
      hg::emu::detail::double_to_half_bits(std::fma(double(float(a)), double(float(b)), double(float(c))))};
}
inline __half __hadd_rn(__half a, __half b) { return __hadd(a, b); }
inline __half __hmul_rn(__half a, __half b) { return __hmul(a, b); }
inline __half __hsub_rn(__half a, __half b) { return __hsub(a, b); }
inline bool __hisnan(__half a) { return (__half_as_ushort(a) & 0x7fffu) > 0x7c00u; }
inline int __hisinf(__half a) {
  const unsigned short u = __half_as_ushort(a);
  return u == 0x7c00u ? 1 : (u == 0xfc00u ? -1 : 0);
}
inline __half __hadd_sat(__half a, __half b) {
  const float r = float(a) + float(b);
  return __half(std::isnan(r) ? 0.0f : std::fmin(std::fmax(r, 0.0f), 1.0f));
}
// fmax/fmin semantics: a NaN operand is ignored; both NaN gives the canonical NaN.
inline __half __hmax(__half a, __half b) {
  if (__hisnan(a) && __hisnan(b)) return __ushort_as_half(0x7fffu);
  return __hisnan(a) ? b : (__hisnan(b) ? a : (float(a) > float(b) ? a : b));
}
inline __half __hmin(__half a, __half b) {
  if (__hisnan(a) && __hisnan(b)) return __ushort_as_half(0x7fffu);
  return __hisnan(a) ? b : (__hisnan(b) ? a : (float(a) < float(b) ? a : b));
}
inline __half __hmax_nan(__half a, __half b) { return __hisnan(a) ? a : (__hisnan(b) ? b : __hmax(a, b)); }
inline __half __hmin_nan(__half a, __half b) { return __hisnan(a) ? a : (__hisnan(b) ? b : __hmin(a, b)); }
// Ordered comparisons are false with a NaN; the *u variants are true.
inline bool __heq(__half a, __half b) { return float(a) == float(b); }
inline bool __hne(__half a, __half b) { return !__hisnan(a) && !__hisnan(b) && float(a) != float(b); }
inline bool __hlt(__half a, __half b) { return float(a) < float(b); }
inline bool __hle(__half a, __half b) { return float(a) <= float(b); }
inline bool __hgt(__half a, __half b) { return float(a) > float(b); }
inline bool __hge(__half a, __half b) { return float(a) >= float(b); }
inline bool __hequ(__half a, __half b) { return !(float(a) != float(b)) || __hisnan(a) || __hisnan(b); }
inline bool __hneu(__half a, __half b) { return float(a) != float(b); }
inline bool __hltu(__half a, __half b) { return !(float(a) >= float(b)); }
inline bool __hleu(__half a, __half b) { return !(float(a) > float(b)); }
inline bool __hgtu(__half a, __half b) { return !(float(a) <= float(b)); }
inline bool __hgeu(__half a, __half b) { return !(float(a) < float(b)); }

// Math functions: computed in float, rounded once (the GPU's are approximate
// to about 1 ulp of half; tests compare with a tolerance, not bits).
inline __half hsqrt(__half a) { return __half(std::sqrt(float(a))); }
inline __half hrsqrt(__half a) { return __half(1.0f / std::sqrt(float(a))); }
inline __half hrcp(__half a) { return __half(1.0f / float(a)); }
inline __half hexp(__half a) { return __half(std::exp(float(a))); }
inline __half hexp2(__half a) { return __half(std::exp2(float(a))); }
inline __half hlog(__half a) { return __half(std::log(float(a))); }
inline __half hlog2(__half a) { return __half(std::log2(float(a))); }
inline __half htanh(__half a) { return __half(std::tanh(float(a))); }
inline __half hsin(__half a) { return __half(std::sin(float(a))); }
inline __half hcos(__half a) { return __half(std::cos(float(a))); }
inline __half hfloor(__half a) { return __half(std::floor(float(a))); }
inline __half hceil(__half a) { return __half(std::ceil(float(a))); }
inline __half htrunc(__half a) { return __half(std::trunc(float(a))); }
inline __half hrint(__half a) { return __half(std::nearbyint(float(a))); }

// ---- half2: lane-wise --------------------------------------------------------------
#define HG_EMU_HALF2_BINARY(name2, name1) \
  inline __half2 name2(__half2 a, __half2 b) { return __half2(name1(a.x, b.x), name1(a.y, b.y)); }
HG_EMU_HALF2_BINARY(__hadd2, __hadd)
HG_EMU_HALF2_BINARY(__hsub2, __hsub)
HG_EMU_HALF2_BINARY(__hmul2, __hmul)
HG_EMU_HALF2_BINARY(__h2div, __hdiv)
HG_EMU_HALF2_BINARY(__hmax2, __hmax)
HG_EMU_HALF2_BINARY(__hmin2, __hmin)
HG_EMU_HALF2_BINARY(__hadd2_sat, __hadd_sat)
#undef HG_EMU_HALF2_BINARY
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
inline __half2 h2sqrt(__half2 a) { return __half2(hsqrt(a.x), hsqrt(a.y)); }
inline __half2 h2exp(__half2 a) { return __half2(hexp(a.x), hexp(a.y)); }
inline __half2 h2rcp(__half2 a) { return __half2(hrcp(a.x), hrcp(a.y)); }
inline __half2 __hisnan2(__half2 a) {
  return __half2(__half(__hisnan(a.x) ? 1.0f : 0.0f), __half(__hisnan(a.y) ? 1.0f : 0.0f));
}
inline bool __hbeq2(__half2 a, __half2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }
inline bool __hbneu2(__half2 a, __half2 b) { return __hneu(a.x, b.x) && __hneu(a.y, b.y); }
inline bool __hblt2(__half2 a, __half2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }
inline bool __hble2(__half2 a, __half2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }
inline bool __hbgt2(__half2 a, __half2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }
inline bool __hbge2(__half2 a, __half2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }

// ---- operators (same set as cuda_fp16.hpp) ---------------------------------------------
inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
inline __half operator+(const __half& a) { return a; }
inline __half operator-(const __half& a) { return __hneg(a); }
inline __half& operator++(__half& a) { return a = __hadd(a, __ushort_as_half(0x3c00u)); }
inline __half& operator--(__half& a) { return a = __hsub(a, __ushort_as_half(0x3c00u)); }
inline __half operator++(__half& a, int) {
  const __half old = a;
  ++a;
  return old;
}
inline __half operator--(__half& a, int) {
  const __half old = a;
  --a;
  return old;
}
inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
inline bool operator!=(const __half& a, const __half& b) { return __hneu(a, b); }
inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }
inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
inline __half2& operator-=(__half2& a, const __half2& b) { return a = __hsub2(a, b); }
inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
inline __half2& operator/=(__half2& a, const __half2& b) { return a = __h2div(a, b); }
inline __half2 operator-(const __half2& a) { return __hneg2(a); }
inline bool operator==(const __half2& a, const __half2& b) { return __hbeq2(a, b); }
inline bool operator!=(const __half2& a, const __half2& b) { return __hbneu2(a, b); }

// ---- atomics (sm_70+: __half, sm_60+: __half2) ----------------------------------------
// A compare-and-swap loop on the 16/32-bit word, like the GPU's own fallback;
// returns the old value.
inline __half atomicAdd(__half* address, __half val) {
  unsigned short* word = reinterpret_cast<unsigned short*>(address);
  unsigned short old = __atomic_load_n(word, __ATOMIC_RELAXED);
  unsigned short desired;
  do {
    desired = __half_as_ushort(__hadd(__ushort_as_half(old), val));
  } while (!__atomic_compare_exchange_n(word, &old, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return __ushort_as_half(old);
}
inline __half2 atomicAdd(__half2* address, __half2 val) {
  unsigned int* word = reinterpret_cast<unsigned int*>(address);
  unsigned int old = __atomic_load_n(word, __ATOMIC_RELAXED);
  unsigned int desired;
  do {
    __half2 current;
    std::memcpy(&current, &old, sizeof old);
    const __half2 sum = __hadd2(current, val);
    std::memcpy(&desired, &sum, sizeof desired);
  } while (!__atomic_compare_exchange_n(word, &old, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  __half2 previous;
  std::memcpy(&previous, &old, sizeof old);
  return previous;
}
