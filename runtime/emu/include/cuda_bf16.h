// cuda-emu stand-in for CUDA's cuda_bf16.h: __nv_bfloat16, __nv_bfloat162 and the
// intrinsics kernels use, built on hg::bfloat16's conversions (core/half.h).
// Arithmetic rounds like the GPU: see Note [Emulated 16-bit arithmetic] in
// hg_emu_float16.h. Mirrors the real class interface (implicit conversions
// included), so what is ambiguous for nvcc is ambiguous here.
#pragma once

#include <cmath>
#include <cstring>

#include "cuda_fp16.h"
#include "hg_emu_float16.h"
#include "vector_types.h"

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat162_raw {
  unsigned short x, y;
};

struct __attribute__((may_alias, aligned(2))) __nv_bfloat16 {
 protected:
  unsigned short __x;

 public:
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(const __nv_bfloat16_raw& raw) : __x(raw.x) {}  // NOLINT
  __nv_bfloat16& operator=(const __nv_bfloat16_raw& raw) {
    __x = raw.x;
    return *this;
  }
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }  // NOLINT

  __nv_bfloat16(float f) : __x(hg::detail::float_to_bfloat16_bits(f)) {}         // NOLINT
  __nv_bfloat16(double d) : __x(hg::emu::detail::double_to_bfloat16_bits(d)) {}  // NOLINT
  explicit __nv_bfloat16(__half h) : __nv_bfloat16(static_cast<float>(h)) {}
  __nv_bfloat16(short v) : __nv_bfloat16(static_cast<float>(v)) {}                // NOLINT
  __nv_bfloat16(unsigned short v) : __nv_bfloat16(static_cast<float>(v)) {}       // NOLINT
  __nv_bfloat16(int v) : __nv_bfloat16(static_cast<double>(v)) {}                 // NOLINT
  __nv_bfloat16(unsigned int v) : __nv_bfloat16(static_cast<double>(v)) {}        // NOLINT
  __nv_bfloat16(long v) : __nv_bfloat16(static_cast<double>(v)) {}                // NOLINT
  __nv_bfloat16(unsigned long v) : __nv_bfloat16(static_cast<double>(v)) {}       // NOLINT
  __nv_bfloat16(long long v) : __nv_bfloat16(static_cast<double>(v)) {}           // NOLINT
  __nv_bfloat16(unsigned long long v) : __nv_bfloat16(static_cast<double>(v)) {}  // NOLINT
  __nv_bfloat16& operator=(float f) { return *this = __nv_bfloat16(f); }
  __nv_bfloat16& operator=(double d) { return *this = __nv_bfloat16(d); }

  operator float() const { return hg::detail::bfloat16_bits_to_float(__x); }  // NOLINT
#define HG_EMU_BF16_TO_INT(T)                                                                            \
  operator T() const {                                                                                   \
    return hg::emu::detail::float_to_int_saturate<T>(float(*this), hg::emu::detail::IntRounding::kZero); \
  }
  HG_EMU_BF16_TO_INT(signed char)
  HG_EMU_BF16_TO_INT(unsigned char)
  HG_EMU_BF16_TO_INT(char)
  HG_EMU_BF16_TO_INT(short)
  HG_EMU_BF16_TO_INT(unsigned short)
  HG_EMU_BF16_TO_INT(int)
  HG_EMU_BF16_TO_INT(unsigned int)
  HG_EMU_BF16_TO_INT(long)
  HG_EMU_BF16_TO_INT(unsigned long)
  HG_EMU_BF16_TO_INT(long long)
  HG_EMU_BF16_TO_INT(unsigned long long)
#undef HG_EMU_BF16_TO_INT
  explicit operator bool() const { return (__x & 0x7fffu) != 0; }
};

struct __attribute__((may_alias, aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  __nv_bfloat162(const __nv_bfloat162_raw& raw)  // NOLINT
      : x(__nv_bfloat16_raw{raw.x}), y(__nv_bfloat16_raw{raw.y}) {}
  operator __nv_bfloat162_raw() const {  // NOLINT
    return __nv_bfloat162_raw{__nv_bfloat16_raw(x).x, __nv_bfloat16_raw(y).x};
  }
};

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4, "__nv_bfloat16 layout must match CUDA");

// ---- conversions ----------------------------------------------------------------
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return __nv_bfloat16_raw(b).x; }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return static_cast<short>(__nv_bfloat16_raw(b).x); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16_raw{u}; }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16_raw{static_cast<unsigned short>(s)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(__nv_bfloat16(f), __nv_bfloat16(f)); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return float2{float(b.x), float(b.y)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float __low2float(__nv_bfloat162 b) { return float(b.x); }
inline float __high2float(__nv_bfloat162 b) { return float(b.y); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }
inline __half __bfloat162half(__nv_bfloat16 b) { return __half(float(b)); }
inline int __bfloat162int_rn(__nv_bfloat16 b) {
  return hg::emu::detail::float_to_int_saturate<int>(float(b), hg::emu::detail::IntRounding::kNearest);
}
inline int __bfloat162int_rz(__nv_bfloat16 b) {
  return hg::emu::detail::float_to_int_saturate<int>(float(b), hg::emu::detail::IntRounding::kZero);
}
inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(i); }

// ---- arithmetic (overloads of the __half names, as in CUDA) -----------------------
inline bool __hisnan(__nv_bfloat16 a) { return (__bfloat16_as_ushort(a) & 0x7fffu) > 0x7f80u; }
inline int __hisinf(__nv_bfloat16 a) {
  const unsigned short u = __bfloat16_as_ushort(a);
  return u == 0x7f80u ? 1 : (u == 0xff80u ? -1 : 0);
}
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) + float(b)); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) - float(b)); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) * float(b)); }
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) / float(b)); }
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __ushort_as_bfloat16(__bfloat16_as_ushort(a) ^ 0x8000u); }
inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __ushort_as_bfloat16(__bfloat16_as_ushort(a) & 0x7fffu); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16_raw{
      hg::emu::detail::double_to_bfloat16_bits(std::fma(double(float(a)), double(float(b)), double(float(c))))};
}
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
  if (__hisnan(a) && __hisnan(b)) return __ushort_as_bfloat16(0x7fffu);
  return __hisnan(a) ? b : (__hisnan(b) ? a : (float(a) > float(b) ? a : b));
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
  if (__hisnan(a) && __hisnan(b)) return __ushort_as_bfloat16(0x7fffu);
  return __hisnan(a) ? b : (__hisnan(b) ? a : (float(a) < float(b) ? a : b));
}
inline bool __heq(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) == float(b); }
inline bool __hne(__nv_bfloat16 a, __nv_bfloat16 b) { return !__hisnan(a) && !__hisnan(b) && float(a) != float(b); }
inline bool __hneu(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) != float(b); }
inline bool __hlt(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) < float(b); }
inline bool __hle(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) <= float(b); }
inline bool __hgt(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) > float(b); }
inline bool __hge(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) >= float(b); }
inline __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __nv_bfloat16(std::sqrt(float(a))); }
inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / std::sqrt(float(a))); }
inline __nv_bfloat16 hexp(__nv_bfloat16 a) { return __nv_bfloat16(std::exp(float(a))); }
inline __nv_bfloat16 hlog(__nv_bfloat16 a) { return __nv_bfloat16(std::log(float(a))); }
inline __nv_bfloat16 htanh(__nv_bfloat16 a) { return __nv_bfloat16(std::tanh(float(a))); }

#define HG_EMU_BF162_BINARY(name2, name1)                           \
  inline __nv_bfloat162 name2(__nv_bfloat162 a, __nv_bfloat162 b) { \
    return __nv_bfloat162(name1(a.x, b.x), name1(a.y, b.y));        \
  }
HG_EMU_BF162_BINARY(__hadd2, __hadd)
HG_EMU_BF162_BINARY(__hsub2, __hsub)
HG_EMU_BF162_BINARY(__hmul2, __hmul)
HG_EMU_BF162_BINARY(__h2div, __hdiv)
HG_EMU_BF162_BINARY(__hmax2, __hmax)
HG_EMU_BF162_BINARY(__hmin2, __hmin)
#undef HG_EMU_BF162_BINARY
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __nv_bfloat162 __hneg2(__nv_bfloat162 a) { return __nv_bfloat162(__hneg(a.x), __hneg(a.y)); }
inline __nv_bfloat162 __habs2(__nv_bfloat162 a) { return __nv_bfloat162(__habs(a.x), __habs(a.y)); }

// ---- operators ------------------------------------------------------------------------
inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hmul(a, b); }
inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hdiv(a, b); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hadd(a, b); }
inline __nv_bfloat16& operator-=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hsub(a, b); }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hmul(a, b); }
inline __nv_bfloat16& operator/=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hdiv(a, b); }
inline __nv_bfloat16 operator+(const __nv_bfloat16& a) { return a; }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __hneg(a); }
inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __heq(a, b); }
inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hneu(a, b); }
inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hlt(a, b); }
inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hle(a, b); }
inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hgt(a, b); }
inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hge(a, b); }
inline __nv_bfloat162 operator+(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hadd2(a, b); }
inline __nv_bfloat162 operator-(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hsub2(a, b); }
inline __nv_bfloat162 operator*(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hmul2(a, b); }
inline __nv_bfloat162 operator/(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __h2div(a, b); }
inline __nv_bfloat162& operator+=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hadd2(a, b); }
inline __nv_bfloat162& operator*=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hmul2(a, b); }

// ---- atomics (sm_80+) -------------------------------------------------------------------
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 val) {
  unsigned short* word = reinterpret_cast<unsigned short*>(address);
  unsigned short old = __atomic_load_n(word, __ATOMIC_RELAXED);
  unsigned short desired;
  do {
    desired = __bfloat16_as_ushort(__hadd(__ushort_as_bfloat16(old), val));
  } while (!__atomic_compare_exchange_n(word, &old, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return __ushort_as_bfloat16(old);
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 val) {
  unsigned int* word = reinterpret_cast<unsigned int*>(address);
  unsigned int old = __atomic_load_n(word, __ATOMIC_RELAXED);
  unsigned int desired;
  do {
    __nv_bfloat162 current;
    std::memcpy(&current, &old, sizeof old);
    const __nv_bfloat162 sum = __hadd2(current, val);
    std::memcpy(&desired, &sum, sizeof desired);
  } while (!__atomic_compare_exchange_n(word, &old, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  __nv_bfloat162 previous;
  std::memcpy(&previous, &old, sizeof old);
  return previous;
}
