// Warp-level sm_80 tensor-core building blocks, one small device function per
// PTX instruction, for kernels that place fragments themselves (the flash
// attention kernels). The gpu build emits the instruction through inline PTX;
// the emu build calls the stand-in of runtime/emu/include/hg_emu_mma_sm80.h,
// which implements the PTX ISA's documented fragment layouts (Note [Emulated
// mma.sync and ldmatrix fragments]) and async-copy groups (Note [Emulated
// cp.async groups]).
//
//   mma_m16n8k16<T>(d, a, b)     d[4] += A[16x16] B[16x8], T = hg::half or hg::bfloat16 inputs, f32 accumulate
//   ldmatrix_x4(r, row)          four 8x8 16-bit matrices from shared memory (lane 8j + i: row i of matrix j)
//   ldmatrix_x4_trans(r, row)    the same, each matrix transposed
//   cp_async_16(dst, src, full)  16 bytes global -> shared, asynchronous; full = false writes 16 zero bytes
//   cp_async_commit()            closes this thread's current group of copies
//   cp_async_wait<N>()           waits until at most N of this thread's committed groups are pending
//   pack2<T>(lo, hi)             two floats rounded to T in one 32-bit register (lo in the low half)
//
// Register layouts (g = lane / 4, t = lane % 4; two 16-bit elements per register):
//   A (16x16)  a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..]   a[2] = A[g][2t+8..]   a[3] = A[g+8][2t+8..]
//   B (16x8)   b[0] = B[2t..2t+1][g]   b[1] = B[2t+8..2t+9][g]
//   C (16x8)   c[0..1] = C[g][2t..2t+1]   c[2..3] = C[g+8][2t..2t+1]
// so the accumulators of two neighbouring n-tiles (16x8 each) are exactly the
// A operand of a following mma once packed to 16 bits (the FlashAttention-2
// register trick: P never leaves registers).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"

#if defined(HG_CUDA_EMU)
#include "hg_emu_mma_sm80.h"
#endif

namespace hg::cuda::sm80 {

template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, hg::half> || std::is_same_v<T, hg::bfloat16>, "mma_m16n8k16: f16 or bf16 inputs");
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::mma_m16n8k16(d, a, b, std::is_same_v<T, hg::bfloat16>);
#else
  if constexpr (std::is_same_v<T, hg::half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::ldmatrix_x4(r, row, false);
#else
  const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::ldmatrix_x4(r, row, true);
#else
  const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// full = false: no global read, the 16 shared bytes become zero (rows past the end).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool full) {
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::cp_async_16(dst, src, full ? 16u : 0u);
#else
  const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = full ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(src_bytes) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0..7");
#if defined(HG_CUDA_EMU)
  ::hg::emu::sm80::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, hg::half>) {
    const __half2 v = __floats2half2_rn(lo, hi);
    std::memcpy(&r, &v, 4);
  } else {
    static_assert(std::is_same_v<T, hg::bfloat16>, "pack2: f16 or bf16");
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::memcpy(&r, &v, 4);
  }
  return r;
}

}  // namespace hg::cuda::sm80
