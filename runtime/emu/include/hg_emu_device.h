// cuda-emu device side: what CUDA device code sees (qualifiers, built-in
// variables, barriers, warp intrinsics, atomics, fast-math intrinsics), for the
// .cu sources compiled by g++ in the emu build. Each CUDA thread runs as a fiber
// of the engine in runtime/emu/engine.cpp; the functions below that synchronise
// (__syncthreads, __syncwarp, __shfl_*_sync, votes) switch fibers. How the
// engine schedules, and what it detects, is described in docs/testing.md.
//
// Note [Emulated shared memory]
// `__shared__ float tile[256];` must give every block its own, fresh storage.
// The emulator defines __shared__ as `static thread_local` and runs all blocks
// on one dedicated worker OS thread, one block at a time (a launch holds the
// engine's lock). Each block therefore owns the worker's instance of every
// __shared__ variable while it runs, and before each block the engine fills the
// worker's whole thread-local block of the kernel's module (executable or
// shared library) with 0xFF bytes, so a read of shared memory that no thread of
// this block wrote is NaN (f32/f16/bf16) or -1 (ints), as fresh shared memory is
// garbage on a GPU. Limits: (1) other thread_locals of that module are poisoned
// too, on the worker only; device code must not use thread_locals of its own;
// (2) AddressSanitizer does not put redzones around thread_locals, so an
// out-of-bounds index into a static __shared__ array is not caught (dynamic
// shared memory, below, is heap memory and is caught); (3) a __shared__ array
// declared in a different module than the kernel (e.g. a non-inline device
// function in another shared library) is not poisoned, only reused; (4) the
// static-shared size of a kernel is not counted against the 48 KiB limit (nvcc
// enforces it at compile time in the gpu build).
// Dynamic shared memory (`extern __shared__`) cannot be spelled the CUDA way
// with g++ (`extern static` is ill-formed): kernels call
// hg::cuda::dynamic_shared<T>() from kernels/cuda/launch.cuh, which is the
// `extern __shared__` array under nvcc and a per-block heap buffer here, sized by
// the launch and poisoned the same way.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "hg_emu_float16.h"
#include "hg_emu_types.h"
#include "vector_types.h"

// ---- qualifiers ------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
#define __managed__
#define __grid_constant__
#define __shared__ static thread_local  // see Note [Emulated shared memory]
// __restrict__ is already a g++ keyword. __noinline__ is not defined: libstdc++
// and Boost spell `__attribute__((__noinline__))`, which such a macro would break.

namespace hg::emu {

// What a running CUDA thread knows about itself and its block.
struct DeviceThread {
  uint3 thread_idx;
  unsigned linear_id;  // x + y*bx + z*bx*by, the id that picks the warp and lane
};
struct DeviceBlock {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  unsigned char* dynamic_smem = nullptr;  // per-block heap buffer, poisoned
  size_t dynamic_smem_bytes = 0;
};

enum class BarrierOp : uint8_t { kSync, kCount, kAnd, kOr };
enum class WarpOp : uint8_t {
  kSyncWarp,
  kShflIdx,
  kShflUp,
  kShflDown,
  kShflXor,
  kBallot,
  kAny,
  kAll,
  kMatchAny,
  kMatchAll,
  kReduceAdd,
  kReduceMinS,
  kReduceMinU,
  kReduceMaxS,
  kReduceMaxU,
  kReduceAnd,
  kReduceOr,
  kReduceXor,
};

namespace detail {
// The fiber running now (nullptr outside kernels) and its block. Plain globals,
// not thread_locals: see Note [Emulated shared memory]; launches are serialised.
extern DeviceThread* g_thread;
extern DeviceBlock g_block;

// Block-wide barrier; returns the count/and/or of `predicate` over the block.
int block_barrier(BarrierOp op, int predicate, const std::source_location& where);
// Warp rendezvous of the lanes in `mask`; returns this lane's result bits.
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, unsigned arg, unsigned width,
                 const std::source_location& where);
unsigned active_mask();
[[noreturn]] void device_trap(const char* what, const std::source_location& where);
// assert() inside a kernel: reports cudaErrorAssert for the launch. Outside a
// kernel it behaves like the host assert.
[[noreturn]] void device_assert_fail(const char* expr, const char* file, unsigned line, const char* function);

template <typename T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp intrinsics move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace detail

inline unsigned char* dynamic_shared_memory() { return detail::g_block.dynamic_smem; }

}  // namespace hg::emu

// ---- built-in variables ---------------------------------------------------------------
#define threadIdx (::hg::emu::detail::g_thread->thread_idx)
#define blockIdx (::hg::emu::detail::g_block.block_idx)
#define blockDim (::hg::emu::detail::g_block.block_dim)
#define gridDim (::hg::emu::detail::g_block.grid_dim)
inline constexpr int warpSize = hg::emu::kWarpSize;

// ---- assert: a failed device assert fails the launch (cudaErrorAssert) ---------------
// Replaces <cassert>'s macro. <assert.h> redefines assert each time it is
// included, so include <cassert> before <cuda_runtime.h> in kernel files; a
// later include brings back the host assert, which aborts the test process
// instead of failing the launch.
#undef assert
#if defined(NDEBUG)
#define assert(expr) static_cast<void>(0)
#else
#define assert(expr)                              \
  (static_cast<bool>(expr) ? static_cast<void>(0) \
                           : ::hg::emu::detail::device_assert_fail(#expr, __FILE__, __LINE__, __func__))
#endif

// ---- barriers -----------------------------------------------------------------------
// Every barrier records its source location: threads of a block waiting at two
// different __syncthreads() calls are reported, as is a barrier some threads
// never reach.
inline void __syncthreads(const std::source_location& where = std::source_location::current()) {
  hg::emu::detail::block_barrier(hg::emu::BarrierOp::kSync, 0, where);
}
inline int __syncthreads_count(int predicate, const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::block_barrier(hg::emu::BarrierOp::kCount, predicate, where);
}
inline int __syncthreads_and(int predicate, const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::block_barrier(hg::emu::BarrierOp::kAnd, predicate, where);
}
inline int __syncthreads_or(int predicate, const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::block_barrier(hg::emu::BarrierOp::kOr, predicate, where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       const std::source_location& where = std::source_location::current()) {
  hg::emu::detail::warp_op(hg::emu::WarpOp::kSyncWarp, mask, 0, 0, 32, where);
}
// Memory fences order this thread's writes; the emulator runs one thread at a
// time, so they only need to stop the compiler from reordering.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- warp shuffles and votes ------------------------------------------------------------
// Lanes named in `mask` rendezvous (exited lanes are excused, as in CUDA); a
// source lane outside the segment, inactive or exited yields the caller's value.
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::from_bits<T>(
      hg::emu::detail::warp_op(hg::emu::WarpOp::kShflIdx, mask, hg::emu::detail::to_bits(var),
                               static_cast<unsigned>(src_lane), static_cast<unsigned>(width), where));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::from_bits<T>(hg::emu::detail::warp_op(
      hg::emu::WarpOp::kShflUp, mask, hg::emu::detail::to_bits(var), delta, static_cast<unsigned>(width), where));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::from_bits<T>(hg::emu::detail::warp_op(
      hg::emu::WarpOp::kShflDown, mask, hg::emu::detail::to_bits(var), delta, static_cast<unsigned>(width), where));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  const std::source_location& where = std::source_location::current()) {
  return hg::emu::detail::from_bits<T>(
      hg::emu::detail::warp_op(hg::emu::WarpOp::kShflXor, mask, hg::emu::detail::to_bits(var),
                               static_cast<unsigned>(lane_mask), static_cast<unsigned>(width), where));
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const std::source_location& where = std::source_location::current()) {
  return static_cast<unsigned>(hg::emu::detail::warp_op(hg::emu::WarpOp::kBallot, mask, predicate != 0, 0, 32, where));
}
inline int __any_sync(unsigned mask, int predicate,
                      const std::source_location& where = std::source_location::current()) {
  return static_cast<int>(hg::emu::detail::warp_op(hg::emu::WarpOp::kAny, mask, predicate != 0, 0, 32, where));
}
inline int __all_sync(unsigned mask, int predicate,
                      const std::source_location& where = std::source_location::current()) {
  return static_cast<int>(hg::emu::detail::warp_op(hg::emu::WarpOp::kAll, mask, predicate != 0, 0, 32, where));
}
inline unsigned __activemask() { return hg::emu::detail::active_mask(); }
template <typename T>
unsigned __match_any_sync(unsigned mask, T value, const std::source_location& where = std::source_location::current()) {
  return static_cast<unsigned>(
      hg::emu::detail::warp_op(hg::emu::WarpOp::kMatchAny, mask, hg::emu::detail::to_bits(value), 0, 32, where));
}
template <typename T>
unsigned __match_all_sync(unsigned mask, T value, int* pred,
                          const std::source_location& where = std::source_location::current()) {
  const auto r = static_cast<unsigned>(
      hg::emu::detail::warp_op(hg::emu::WarpOp::kMatchAll, mask, hg::emu::detail::to_bits(value), 0, 32, where));
  *pred = r != 0;
  return r;
}
#define HG_EMU_WARP_REDUCE(name, T, op)                                                                        \
  inline T name(unsigned mask, T value, const std::source_location& where = std::source_location::current()) { \
    return static_cast<T>(                                                                                     \
        hg::emu::detail::warp_op(hg::emu::WarpOp::op, mask, static_cast<uint32_t>(value), 0, 32, where));      \
  }
HG_EMU_WARP_REDUCE(__reduce_add_sync, unsigned, kReduceAdd)
HG_EMU_WARP_REDUCE(__reduce_add_sync, int, kReduceAdd)
HG_EMU_WARP_REDUCE(__reduce_min_sync, unsigned, kReduceMinU)
HG_EMU_WARP_REDUCE(__reduce_min_sync, int, kReduceMinS)
HG_EMU_WARP_REDUCE(__reduce_max_sync, unsigned, kReduceMaxU)
HG_EMU_WARP_REDUCE(__reduce_max_sync, int, kReduceMaxS)
HG_EMU_WARP_REDUCE(__reduce_and_sync, unsigned, kReduceAnd)
HG_EMU_WARP_REDUCE(__reduce_or_sync, unsigned, kReduceOr)
HG_EMU_WARP_REDUCE(__reduce_xor_sync, unsigned, kReduceXor)
#undef HG_EMU_WARP_REDUCE

// ---- atomics ------------------------------------------------------------------------------
// Real atomic read-modify-writes (GCC builtins), so they stay correct should
// blocks ever run on several OS threads; all return the old value.
#define HG_EMU_ATOMIC_INT(T)                                                                                 \
  inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }                       \
  inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }                       \
  inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }                         \
  inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }                       \
  inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }                     \
  inline T atomicCAS(T* p, T compare, T v) {                                                                 \
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                  \
    return compare;                                                                                          \
  }                                                                                                          \
  inline T atomicMax(T* p, T v) {                                                                            \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                            \
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
    return old;                                                                                              \
  }                                                                                                          \
  inline T atomicMin(T* p, T v) {                                                                            \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                            \
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
    return old;                                                                                              \
  }                                                                                                          \
  inline T atomicAdd_block(T* p, T v) { return atomicAdd(p, v); }                                            \
  inline T atomicAdd_system(T* p, T v) { return atomicAdd(p, v); }
HG_EMU_ATOMIC_INT(int)
HG_EMU_ATOMIC_INT(unsigned int)
HG_EMU_ATOMIC_INT(unsigned long long)
#undef HG_EMU_ATOMIC_INT
inline long long atomicMax(long long* p, long long v) {
  long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
inline long long atomicMin(long long* p, long long v) {
  long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
inline int atomicSub(int* p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
// ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1).
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (
      !__atomic_compare_exchange_n(p, &old, old >= limit ? 0u : old + 1u, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, (old == 0u || old > limit) ? limit : old - 1u, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {}
  return old;
}

namespace hg::emu::detail {
// Floating-point atomics as a CAS loop on the bits; `update` maps old -> new.
template <typename F, typename Bits, typename Update>
F atomic_float_update(F* p, Update update) {
  static_assert(sizeof(F) == sizeof(Bits));
  Bits* word = reinterpret_cast<Bits*>(p);
  Bits old_bits = __atomic_load_n(word, __ATOMIC_RELAXED);
  Bits new_bits;
  F old_value;
  do {
    std::memcpy(&old_value, &old_bits, sizeof(F));
    const F new_value = update(old_value);
    std::memcpy(&new_bits, &new_value, sizeof(F));
  } while (!__atomic_compare_exchange_n(word, &old_bits, new_bits, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old_value;
}
}  // namespace hg::emu::detail

inline float atomicAdd(float* p, float v) {
  return hg::emu::detail::atomic_float_update<float, uint32_t>(p, [v](float old) { return old + v; });
}
inline double atomicAdd(double* p, double v) {
  return hg::emu::detail::atomic_float_update<double, uint64_t>(p, [v](double old) { return old + v; });
}
inline float atomicExch(float* p, float v) {
  return hg::emu::detail::atomic_float_update<float, uint32_t>(p, [v](float) { return v; });
}
inline float atomicAdd_block(float* p, float v) { return atomicAdd(p, v); }
inline float atomicAdd_system(float* p, float v) { return atomicAdd(p, v); }

// ---- loads and stores with cache hints: plain accesses here ----------------------------
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}
template <typename T>
T __ldca(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
T __ldlu(const T* p) {
  return *p;
}
template <typename T>
T __ldcv(const T* p) {
  return *p;
}
template <typename T>
void __stwb(T* p, T v) {
  *p = v;
}
template <typename T>
void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
void __stcs(T* p, T v) {
  *p = v;
}
template <typename T>
void __stwt(T* p, T v) {
  *p = v;
}

// ---- integer intrinsics -------------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned selector = (s >> (4 * i)) & 7u;
    r |= static_cast<unsigned>((bytes >> (8 * selector)) & 0xffu) << (8 * i);
  }
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  const unsigned long long a_lo = a & 0xffffffffull, a_hi = a >> 32;
  const unsigned long long b_lo = b & 0xffffffffull, b_hi = b >> 32;
  const unsigned long long lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi;
  const unsigned long long cross = (lo_lo >> 32) + (hi_lo & 0xffffffffull) + lo_hi;
  return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }

// ---- float intrinsics ----------------------------------------------------------------------
// The GPU's fast versions (__expf, __logf, ...) are approximate; here they are
// the accurate libm functions, so kernels must not depend on their exact bits.
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline float __tanhf(float x) { return std::tanh(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : std::fmin(std::fmax(x, 0.0f), 1.0f); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float sinpif(float x) { return static_cast<float>(std::sin(M_PI * static_cast<double>(x))); }
inline float cospif(float x) { return static_cast<float>(std::cos(M_PI * static_cast<double>(x))); }
inline void sincospif(float x, float* s, float* c) {
  *s = sinpif(x);
  *c = cospif(x);
}
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }

inline int __float_as_int(float f) { return hg::emu::detail::from_bits<int>(hg::emu::detail::to_bits(f)); }
inline unsigned __float_as_uint(float f) { return hg::emu::detail::from_bits<unsigned>(hg::emu::detail::to_bits(f)); }
inline float __int_as_float(int i) { return hg::emu::detail::from_bits<float>(hg::emu::detail::to_bits(i)); }
inline float __uint_as_float(unsigned u) { return hg::emu::detail::from_bits<float>(hg::emu::detail::to_bits(u)); }
inline long long __double_as_longlong(double d) {
  return hg::emu::detail::from_bits<long long>(hg::emu::detail::to_bits(d));
}
inline double __longlong_as_double(long long i) {
  return hg::emu::detail::from_bits<double>(hg::emu::detail::to_bits(i));
}
#define HG_EMU_FLOAT_TO_INT(name, F, T, mode)                                                                    \
  inline T name(F f) {                                                                                           \
    return hg::emu::detail::float_to_int_saturate<T>(static_cast<float>(f), hg::emu::detail::IntRounding::mode); \
  }
HG_EMU_FLOAT_TO_INT(__float2int_rn, float, int, kNearest)
HG_EMU_FLOAT_TO_INT(__float2int_rz, float, int, kZero)
HG_EMU_FLOAT_TO_INT(__float2int_rd, float, int, kDown)
HG_EMU_FLOAT_TO_INT(__float2int_ru, float, int, kUp)
HG_EMU_FLOAT_TO_INT(__float2uint_rn, float, unsigned, kNearest)
HG_EMU_FLOAT_TO_INT(__float2uint_rz, float, unsigned, kZero)
HG_EMU_FLOAT_TO_INT(__float2ll_rn, float, long long, kNearest)
HG_EMU_FLOAT_TO_INT(__float2ll_rz, float, long long, kZero)
#undef HG_EMU_FLOAT_TO_INT
inline float __int2float_rn(int i) { return static_cast<float>(i); }
inline float __uint2float_rn(unsigned i) { return static_cast<float>(i); }
inline float __ll2float_rn(long long i) { return static_cast<float>(i); }
inline float __double2float_rn(double d) { return static_cast<float>(d); }

// CUDA's device min/max overloads (global namespace, as in math_functions.h).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- misc ------------------------------------------------------------------------------------
[[noreturn]] inline void __trap(const std::source_location& where = std::source_location::current()) {
  hg::emu::detail::device_trap("__trap()", where);
}
[[noreturn]] inline void __brkpt(const std::source_location& where = std::source_location::current()) {
  hg::emu::detail::device_trap("__brkpt()", where);
}
inline void __nanosleep(unsigned) {}
long long clock64();
