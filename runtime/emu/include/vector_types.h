// cuda-emu stand-in for CUDA's vector_types.h: char1..double4, dim3 (from
// hg_emu_types.h) and the make_* constructors. Sizes and alignments follow the
// real header (float4/int4/uint4/double2: 16 bytes; float2: 8; float3: 4), so a
// 128-bit packed load `reinterpret_cast<const float4*>(p)[i]` has the same
// alignment requirement as on the GPU. Every type is may_alias: kernels read
// halves through uint4/float4 pointers, which is fine for nvcc and would be
// undefined behaviour (miscompiled under -fstrict-aliasing) for g++ otherwise.
#pragma once

#include "hg_emu_types.h"

#define HG_EMU_VECTOR_TYPE(name, align) struct __attribute__((may_alias, aligned(align))) name

HG_EMU_VECTOR_TYPE(char1, 1) { char x; };
HG_EMU_VECTOR_TYPE(char2, 2) { char x, y; };
HG_EMU_VECTOR_TYPE(char3, 1) { char x, y, z; };
HG_EMU_VECTOR_TYPE(char4, 4) { char x, y, z, w; };

HG_EMU_VECTOR_TYPE(uchar1, 1) { unsigned char x; };
HG_EMU_VECTOR_TYPE(uchar2, 2) { unsigned char x, y; };
HG_EMU_VECTOR_TYPE(uchar3, 1) { unsigned char x, y, z; };
HG_EMU_VECTOR_TYPE(uchar4, 4) { unsigned char x, y, z, w; };

HG_EMU_VECTOR_TYPE(short1, 2) { short x; };
HG_EMU_VECTOR_TYPE(short2, 4) { short x, y; };
HG_EMU_VECTOR_TYPE(short3, 2) { short x, y, z; };
HG_EMU_VECTOR_TYPE(short4, 8) { short x, y, z, w; };

HG_EMU_VECTOR_TYPE(ushort1, 2) { unsigned short x; };
HG_EMU_VECTOR_TYPE(ushort2, 4) { unsigned short x, y; };
HG_EMU_VECTOR_TYPE(ushort3, 2) { unsigned short x, y, z; };
HG_EMU_VECTOR_TYPE(ushort4, 8) { unsigned short x, y, z, w; };

HG_EMU_VECTOR_TYPE(int1, 4) { int x; };
HG_EMU_VECTOR_TYPE(int2, 8) { int x, y; };
HG_EMU_VECTOR_TYPE(int3, 4) { int x, y, z; };
HG_EMU_VECTOR_TYPE(int4, 16) { int x, y, z, w; };

HG_EMU_VECTOR_TYPE(uint1, 4) { unsigned int x; };
HG_EMU_VECTOR_TYPE(uint2, 8) { unsigned int x, y; };
HG_EMU_VECTOR_TYPE(uint3, 4) { unsigned int x, y, z; };
HG_EMU_VECTOR_TYPE(uint4, 16) { unsigned int x, y, z, w; };

HG_EMU_VECTOR_TYPE(long1, 8) { long x; };
HG_EMU_VECTOR_TYPE(long2, 16) { long x, y; };
HG_EMU_VECTOR_TYPE(long3, 8) { long x, y, z; };
HG_EMU_VECTOR_TYPE(long4, 16) { long x, y, z, w; };

HG_EMU_VECTOR_TYPE(ulong1, 8) { unsigned long x; };
HG_EMU_VECTOR_TYPE(ulong2, 16) { unsigned long x, y; };
HG_EMU_VECTOR_TYPE(ulong3, 8) { unsigned long x, y, z; };
HG_EMU_VECTOR_TYPE(ulong4, 16) { unsigned long x, y, z, w; };

HG_EMU_VECTOR_TYPE(longlong1, 8) { long long x; };
HG_EMU_VECTOR_TYPE(longlong2, 16) { long long x, y; };
HG_EMU_VECTOR_TYPE(longlong3, 8) { long long x, y, z; };
HG_EMU_VECTOR_TYPE(longlong4, 16) { long long x, y, z, w; };

HG_EMU_VECTOR_TYPE(ulonglong1, 8) { unsigned long long x; };
HG_EMU_VECTOR_TYPE(ulonglong2, 16) { unsigned long long x, y; };
HG_EMU_VECTOR_TYPE(ulonglong3, 8) { unsigned long long x, y, z; };
HG_EMU_VECTOR_TYPE(ulonglong4, 16) { unsigned long long x, y, z, w; };

HG_EMU_VECTOR_TYPE(float1, 4) { float x; };
HG_EMU_VECTOR_TYPE(float2, 8) { float x, y; };
HG_EMU_VECTOR_TYPE(float3, 4) { float x, y, z; };
HG_EMU_VECTOR_TYPE(float4, 16) { float x, y, z, w; };

HG_EMU_VECTOR_TYPE(double1, 8) { double x; };
HG_EMU_VECTOR_TYPE(double2, 16) { double x, y; };
HG_EMU_VECTOR_TYPE(double3, 8) { double x, y, z; };
HG_EMU_VECTOR_TYPE(double4, 16) { double x, y, z, w; };

inline char1 make_char1(char x) { return char1{x}; }
inline char2 make_char2(char x, char y) { return char2{x, y}; }
inline char3 make_char3(char x, char y, char z) { return char3{x, y, z}; }
inline char4 make_char4(char x, char y, char z, char w) { return char4{x, y, z, w}; }

inline uchar1 make_uchar1(unsigned char x) { return uchar1{x}; }
inline uchar2 make_uchar2(unsigned char x, unsigned char y) { return uchar2{x, y}; }
inline uchar3 make_uchar3(unsigned char x, unsigned char y, unsigned char z) { return uchar3{x, y, z}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
  return uchar4{x, y, z, w};
}

inline short1 make_short1(short x) { return short1{x}; }
inline short2 make_short2(short x, short y) { return short2{x, y}; }
inline short3 make_short3(short x, short y, short z) { return short3{x, y, z}; }
inline short4 make_short4(short x, short y, short z, short w) { return short4{x, y, z, w}; }

inline ushort1 make_ushort1(unsigned short x) { return ushort1{x}; }
inline ushort2 make_ushort2(unsigned short x, unsigned short y) { return ushort2{x, y}; }
inline ushort3 make_ushort3(unsigned short x, unsigned short y, unsigned short z) { return ushort3{x, y, z}; }
inline ushort4 make_ushort4(unsigned short x, unsigned short y, unsigned short z, unsigned short w) {
  return ushort4{x, y, z, w};
}

inline int1 make_int1(int x) { return int1{x}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

inline uint1 make_uint1(unsigned int x) { return uint1{x}; }
inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return uint4{x, y, z, w}; }

inline long1 make_long1(long x) { return long1{x}; }
inline long2 make_long2(long x, long y) { return long2{x, y}; }
inline long3 make_long3(long x, long y, long z) { return long3{x, y, z}; }
inline long4 make_long4(long x, long y, long z, long w) { return long4{x, y, z, w}; }

inline ulong1 make_ulong1(unsigned long x) { return ulong1{x}; }
inline ulong2 make_ulong2(unsigned long x, unsigned long y) { return ulong2{x, y}; }
inline ulong3 make_ulong3(unsigned long x, unsigned long y, unsigned long z) { return ulong3{x, y, z}; }
inline ulong4 make_ulong4(unsigned long x, unsigned long y, unsigned long z, unsigned long w) {
  return ulong4{x, y, z, w};
}

inline longlong1 make_longlong1(long long x) { return longlong1{x}; }
inline longlong2 make_longlong2(long long x, long long y) { return longlong2{x, y}; }
inline longlong3 make_longlong3(long long x, long long y, long long z) { return longlong3{x, y, z}; }
inline longlong4 make_longlong4(long long x, long long y, long long z, long long w) { return longlong4{x, y, z, w}; }

inline ulonglong1 make_ulonglong1(unsigned long long x) { return ulonglong1{x}; }
inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return ulonglong2{x, y}; }
inline ulonglong3 make_ulonglong3(unsigned long long x, unsigned long long y, unsigned long long z) {
  return ulonglong3{x, y, z};
}
inline ulonglong4 make_ulonglong4(unsigned long long x, unsigned long long y, unsigned long long z,
                                  unsigned long long w) {
  return ulonglong4{x, y, z, w};
}

inline float1 make_float1(float x) { return float1{x}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

inline double1 make_double1(double x) { return double1{x}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline double3 make_double3(double x, double y, double z) { return double3{x, y, z}; }
inline double4 make_double4(double x, double y, double z, double w) { return double4{x, y, z, w}; }

#undef HG_EMU_VECTOR_TYPE

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 must match CUDA");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3 must match CUDA");
static_assert(alignof(uint4) == 16 && alignof(float2) == 8 && alignof(ushort4) == 8,
              "vector alignment must match CUDA");
