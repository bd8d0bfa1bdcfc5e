// The blocked CPU flash attention kernels, written once over a GCC vector type
// in kernels/attention/flash_attention_impl.h and compiled once per ISA
// (flash_attention_sse2.cpp, flash_attention_avx2.cpp,
// flash_attention_avx512.cpp, each with SLEEF's exp of its width).
// kernels/attention/flash_attention_cpu.cpp picks the table of the ISA the vector math
// runs (cpu::vec_isa(), kernels/cpu/vec_math.h) and runs the tasks below on
// its threads; the formulas, split and costs are at the top of that file.
//
// Every function works on one head (FlashHead) and one block of at most
// kFlashBlock query rows (forward, dq) or key rows (dk, dv), in f32: 16-bit
// rows are widened per tile into the scratch buffer (FlashHead::widen, the
// vector math's in-register converters) and the results rounded once
// (FlashHead::narrow). scratch is flash_scratch_floats(d) floats, 64-byte
// aligned, private to the calling thread.
#pragma once

#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace hg::cpu {

// Query rows per forward / dq task and key rows per dk / dv task; also the
// key (forward, dq) and query (dk, dv) tile streamed inside a task.
inline constexpr int64_t kFlashBlock = 64;

// One (batch, head): q, out, d_out, dq [l, d] rows; k, v, dk, dv [s, d]
// rows, all contiguous, of storage type t (lse and delta f32 [l]).
struct FlashHead {
  VecType t = VecType::f32;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* d_out = nullptr;
  void* out = nullptr;              // forward output
  const void* saved_out = nullptr;  // backward input: the forward's out
  float* lse = nullptr;             // forward output, backward input
  float* delta = nullptr;           // backward: D_i = dO_i . O_i (the dq pass writes it)
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t l = 0, s = 0, d = 0;
  float scale = 1.0f;
  bool causal = false;
  void (*widen)(VecType t, const void* x, float* y, int64_t n) = nullptr;
  void (*narrow)(VecType t, const float* x, void* y, int64_t n) = nullptr;
};

// f32 values per thread: the packed transposes, the score tiles and the
// output accumulators of one block.
inline int64_t flash_scratch_floats(int64_t d) {
  return 6 * kFlashBlock * d + 3 * kFlashBlock * kFlashBlock + 4 * kFlashBlock;
}

struct FlashTileKernels {
  const char* name;
  // out and lse of query rows [i0, i0 + kFlashBlock).
  void (*forward_block)(const FlashHead& h, int64_t i0, float* scratch);
  // delta and dq of query rows [i0, i0 + kFlashBlock).
  void (*backward_q_block)(const FlashHead& h, int64_t i0, float* scratch);
  // dk, dv of key rows [j0, j0 + kFlashBlock), from the delta of every
  // query row (run after every backward_q_block of the head).
  void (*backward_kv_block)(const FlashHead& h, int64_t j0, float* scratch);
};

// What cpu::flash_attention_forward / _backward run now for a dtype that is
// not f64: "blocked-avx512", "blocked-avx2", "blocked-sse2" (the tiles of the
// vector math's ISA), or "reference" (HG_CPU_MATH=scalar, or a build
// without SLEEF: the row kernels of kernels/attention/flash_attention_cpu.cpp, which
// f64 always takes).
const char* flash_attention_cpu_path();

namespace fa_sse2 {
const FlashTileKernels& flash_tiles();
}
namespace fa_avx2 {
const FlashTileKernels& flash_tiles();
}
namespace fa_avx512 {
const FlashTileKernels& flash_tiles();
}

}  // namespace hg::cpu
