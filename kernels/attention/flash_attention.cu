// CUDA fused attention (FlashAttention-2), forward and backward side by side,
// then the launchers. Formulas and contract: kernels/attention/flash_attention.h;
// walk-through and static evidence (registers, shared memory, SASS):
// kernels/attention/FLASH.md "Attention: the flash kernel". CPU counterpart and oracle:
// kernels/attention/flash_attention_cpu.cpp.
//
// Every product is a warp-level mma.sync m16n8k16 (16-bit inputs, fp32
// accumulators) through kernels/cuda/mma_sm80.cuh, whose register layouts are
// the PTX ISA's (they are what the emulator implements and tests): operands
// come from padded shared memory by ldmatrix, tiles arrive by cp.async into
// two stages (the next tile loads while this one is used), and row-wise
// softmax work happens in the accumulator registers: a thread holds two rows
// (g and g + 8 of its warp's 16) and the four threads of a quad share a row, so
// row max and sum are two xor-shuffles. P (and dS) are rounded to T in
// registers and fed straight back as the A operand of the next mma.
//
// flash_forward_kernel<T, D>                  | flash_backward_dkdv_kernel<T, D> + flash_backward_dq_kernel<T, D>
//   formula  S = scale Q K^T (masked); per    |   P = exp(S - lse) recomputed, Delta_i = dO_i . O_i (flash_delta_kernel),
//            K/V tile m' = max(m, rowmax S),  |   dP = dO V^T, dS = P (dP - Delta_i);
//            l = l e^(m-m') + rowsum e^(S-m'),|   dkdv: dV_j = sum_i P_ij dO_i, dK_j = scale sum_i dS_ij Q_i
//            O = O e^(m-m') + e^(S-m') V;     |   dq:   dQ_i = scale sum_j dS_ij K_j
//            out = O / l, lse = m + log l     |
//   split    grid (ceil(L/128), H, B): one    |   dkdv: grid (ceil(S/64), H, B), 4 warps, warp w owns keys
//            128-row Q tile per block, 8      |         [16w, 16w+16) of the block's 64; Q/dO tiles of 64
//            warps x 16 rows; K/V tiles of 64 |         (D=128: 32) rows streamed (causal: from the diagonal on)
//            streamed (causal: only up to the |   dq:   grid (ceil(L/64), H, B), 4 warps x 16 query rows;
//            diagonal; a warp skips the mma  |         K/V tiles of 64 streamed (causal: up to the diagonal)
//            work of tiles it cannot see)     |   Deterministic: every output element has one owner and is
//                                             |   summed in a fixed order; no atomics. dQ gets its own pass
//                                             |   (recomputing S and dP: 7 tile products instead of FA2's 5)
//                                             |   because the alternatives are float atomics (run-to-run
//                                             |   differences) or an f32 dQ partial per K/V block,
//                                             |   ceil(S/64) x L x D floats per head, reduced in order.
//   launch   256 threads, dynamic shared      |   128 threads each, dynamic shared memory; flash_delta_kernel
//            memory (above 48 KiB opt-in)     |   first: one warp per row, 4 rows per block
//   bytes    reads Q once, K and V once per Q |   dkdv: K, V once, Q, dO, lse, Delta once per K/V tile;
//            tile: 2 (L D + ceil(L/128) 2 S D)|   dq: Q, dO once, K, V once per Q tile; writes dq, dk, dv
//            writes out 2 L D, lse 4 L (per   |   2 (L + 2 S) D; Delta: reads dO, O, writes 4 L (per head)
//            head); never an L x S matrix     |
//   FLOPs    4 L S D per head (2 L S D        |   dkdv 8 L S D, dq 6 L S D per head (halved when causal)
//            causal)                          |
//   precision scores, m, l, O in fp32; P      |   scores, P, dP, Delta, accumulators fp32; P and dS rounded
//            rounded to T for P V (as FA2);   |   to T for their products; outputs rounded once
//            out rounded once; lse fp32       |
//
// Causal grids whose inputs fit in L2 issue each kernel's heaviest tiles first
// (block_tile below): the blocks that finish last are then the short ones.
//
// Shared memory (elements of T; rows padded by 8 elements = 16 bytes, so the
// 8 row addresses of an ldmatrix fall in 8 distinct 16-byte bank groups and
// every cp.async destination stays 16-byte aligned; LD = D + 8):
//   kernel   region        rows x LD    count     D = 64    D = 128
//   forward  Q tile        128          1         18 KiB    34 KiB
//            K, V tiles    64           2 stages  36 KiB    68 KiB    total 54 / 102 KiB
//   dkdv     K, V tiles    64           1         18 KiB    34 KiB
//            Q, dO tiles   64 / 32      2 stages  36 KiB    34 KiB
//            lse, Delta    64 / 32 fl.  2 stages  1 KiB     0.5 KiB   total 55 / 68.5 KiB
//   dq       Q, dO tiles   64           1         18 KiB    34 KiB
//            K, V tiles    64           2 stages  36 KiB    68 KiB    total 54 / 102 KiB
// (dkdv streams Q/dO tiles of 64 rows for D = 64 and 32 for D = 128, which
// keeps its registers spill-free.) The D = 128 forward and dq kernels fit
// sm_80 and sm_90 (163 / 227 KiB per block) but not sm_86/sm_89 (99 KiB):
// there the launch reports an hg::Error naming the kernel.
//
// Inputs are strided: element (b, h, i, d) of q lives at q[b sb + h sh + i sr + d]
// (the head dim contiguous; the [B, T, 3, H, D] output of a fused qkv
// projection and [B, H, T, D] both qualify), with every row 16-byte aligned;
// outputs are written through strides the same way.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_sm80.cuh"
#include "kernels/attention/flash_attention.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

using sm80::cp_async_16;
using sm80::cp_async_commit;
using sm80::cp_async_wait;
using sm80::ldmatrix_x4;
using sm80::ldmatrix_x4_trans;
using sm80::mma_m16n8k16;
using sm80::pack2;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

constexpr int kFwdRows = 128;  // forward: query rows per block
constexpr int kFwdFrags = 1;   // forward: 16-row fragments per warp by default (HG_FLASH_FWD_WARP_ROWS)
constexpr int kBwdRows = 64;   // backward: query rows per Q tile and keys per K/V tile
constexpr int kBwdWarps = kBwdRows / 16;
constexpr int kKeys = 64;  // keys per K/V tile
// dkdv: query rows per streamed Q/dO tile (32 for D = 128 keeps S^T and dP^T
// small enough that the dK, dV accumulators stay in registers without spills)
template <int D>
constexpr int kDkdvRows = D == 64 ? 64 : 32;

// A [B, H, N, D] operand with strides in elements (the last dim contiguous).
template <typename T>
struct Strided {
  T* p;
  int64_t sb, sh, sr;
  __device__ T* head(int b, int h) const { return p + b * sb + h * sh; }
};

template <int D>
constexpr int kPitch = D + 8;  // shared-memory row pitch in elements

// Rows [row0, row0 + kRows) of a head (row stride sr) into a [kRows][D + 8]
// tile by cp.async; rows past n become zeros. All kThreads threads of the block.
template <int kRows, int D, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* head, int64_t sr, int row0, int n) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = static_cast<int>(threadIdx.x); c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < n;
    const T* src = valid ? head + static_cast<int64_t>(row0 + r) * sr + col : head;
    cp_async_16(tile + r * kPitch<D> + col, src, valid);
  }
}

// The double-buffered stream of tile pairs (K and V in the forward and dq
// kernels, Q and dO in dk/dv): stage s of `stages` holds the pair's first tile
// at stages + 2 s kRows kPitch<D> and its second tile right after it. Rows
// [row0, row0 + kRows) of heads xh and yh into stage `stage`; returns it.
template <int kRows, int D, int kThreads, typename T>
__device__ __forceinline__ T* load_pair_async(T* stages, int stage, const T* xh, int64_t x_sr, const T* yh,
                                              int64_t y_sr, int row0, int n) {
  T* at = stages + stage * 2 * kRows * kPitch<D>;
  load_tile_async<kRows, D, kThreads>(at, xh, x_sr, row0, n);
  load_tile_async<kRows, D, kThreads>(at + kRows * kPitch<D>, yh, y_sr, row0, n);
  return at;
}

// Step j of that stream (pair j starts at row0): starts pair j + 1 into the
// other stage, `also()` adding whatever else that stage holds, then waits for
// pair j (cp.async groups: one in flight while pair j is used) and the block's
// barrier; returns pair j's stage.
template <int kRows, int D, int kThreads, typename T, typename Also>
__device__ __forceinline__ const T* next_pair_stage(T* stages, int j, int n_tiles, const T* xh, int64_t x_sr,
                                                    const T* yh, int64_t y_sr, int row0, int n, Also&& also) {
  if (j + 1 < n_tiles) {
    load_pair_async<kRows, D, kThreads>(stages, (j + 1) % 2, xh, x_sr, yh, y_sr, row0 + kRows, n);
    also();
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
  return stages + (j % 2) * 2 * kRows * kPitch<D>;
}

// The 16 x 16 A operand at (row0, col0) of a row-major tile (pitch ld).
template <typename T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* tile, int ld, int row0, int col0) {
  const int lane = static_cast<int>(threadIdx.x) % 32, mi = lane / 8, ri = lane % 8;
  ldmatrix_x4(a, tile + (row0 + (mi % 2) * 8 + ri) * ld + col0 + (mi / 2) * 8);
}

// B operands of two n-tiles (n0, n0 + 8) x 16 k from a tile stored [n][k]
// (B = tile^T: keys as columns of S = Q K^T): b[0..1] for n0, b[2..3] for n0 + 8.
template <typename T>
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const T* tile, int ld, int n0, int k0) {
  const int lane = static_cast<int>(threadIdx.x) % 32, mi = lane / 8, ri = lane % 8;
  ldmatrix_x4(b, tile + (n0 + (mi / 2) * 8 + ri) * ld + k0 + (mi % 2) * 8);
}

// The same from a tile stored [k][n] (B = tile, e.g. V in P V), through .trans.
template <typename T>
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const T* tile, int ld, int k0, int n0) {
  const int lane = static_cast<int>(threadIdx.x) % 32, mi = lane / 8, ri = lane % 8;
  ldmatrix_x4_trans(b, tile + (k0 + (mi % 2) * 8 + ri) * ld + n0 + (mi / 2) * 8);
}

// acc[f] (16 x kN, kN / 8 accumulators) += A_f B^T for kF row fragments:
// A_f is rows arow0 + 16 f .. + 15 of tile a (16 x kK), B stored [kN][kK] in
// tile b. Each B fragment is loaded once and used by all kF fragments (the
// point of kF > 1: shared-memory reads per mma / kF).
template <typename T, int kK, int kN, int kF>
__device__ __forceinline__ void gemm_a_bt_f(float (&acc)[kF][kN / 8][4], const T* a, int arow0, const T* b, int ld) {
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t fa[kF][4];
#pragma unroll
    for (int f = 0; f < kF; ++f) load_a(fa[f], a, ld, arow0 + 16 * f, kk * 16);
    for (int np = 0; np < kN / 16; ++np) {
      uint32_t fb[4];
      load_b_nk(fb, b, ld, np * 16, kk * 16);
      const uint32_t b0[2] = {fb[0], fb[1]}, b1[2] = {fb[2], fb[3]};
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        mma_m16n8k16<T>(acc[f][2 * np], fa[f], b0);
        mma_m16n8k16<T>(acc[f][2 * np + 1], fa[f], b1);
      }
    }
  }
}

// acc[f] (16 x kN) += P_f B for kF row fragments, P_f (16 x kK) given as
// accumulators p[f][kK / 8] (rounded to T here), B stored [kK][kN] in tile b;
// each B fragment loaded once for all fragments, as above.
template <typename T, int kK, int kN, int kF>
__device__ __forceinline__ void gemm_p_b_f(float (&acc)[kF][kN / 8][4], const float (&p)[kF][kK / 8][4], const T* b,
                                           int ld) {
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t fa[kF][4];
#pragma unroll
    for (int f = 0; f < kF; ++f) {
      fa[f][0] = pack2<T>(p[f][2 * kk][0], p[f][2 * kk][1]);
      fa[f][1] = pack2<T>(p[f][2 * kk][2], p[f][2 * kk][3]);
      fa[f][2] = pack2<T>(p[f][2 * kk + 1][0], p[f][2 * kk + 1][1]);
      fa[f][3] = pack2<T>(p[f][2 * kk + 1][2], p[f][2 * kk + 1][3]);
    }
    for (int np = 0; np < kN / 16; ++np) {
      uint32_t fb[4];
      load_b_kn(fb, b, ld, kk * 16, np * 16);
      const uint32_t b0[2] = {fb[0], fb[1]}, b1[2] = {fb[2], fb[3]};
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        mma_m16n8k16<T>(acc[f][2 * np], fa[f], b0);
        mma_m16n8k16<T>(acc[f][2 * np + 1], fa[f], b1);
      }
    }
  }
}

// One row fragment (the backward's warps own 16 rows): acc (16 x kN) += A B^T
// and acc += P B, as above with kF = 1.
template <typename T, int kK, int kN>
__device__ __forceinline__ void gemm_a_bt(float (&acc)[kN / 8][4], const T* a, int arow0, const T* b, int ld) {
  gemm_a_bt_f<T, kK, kN, 1>(reinterpret_cast<float(&)[1][kN / 8][4]>(acc), a, arow0, b, ld);
}
template <typename T, int kK, int kN>
__device__ __forceinline__ void gemm_p_b(float (&acc)[kN / 8][4], const float (&p)[kK / 8][4], const T* b, int ld) {
  gemm_p_b_f<T, kK, kN, 1>(reinterpret_cast<float(&)[1][kN / 8][4]>(acc),
                           reinterpret_cast<const float(&)[1][kK / 8][4]>(p), b, ld);
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  }
}

// Writes a warp's 16 x D accumulators (times mul) to rows row0 + [0, 16) of a
// strided head, skipping rows >= n.
template <typename T, int D>
__device__ __forceinline__ void store_rows(T* head, int64_t sr, const float (&acc)[D / 8][4], float mul, int row0,
                                           int n) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  for (int half_row = 0; half_row < 2; ++half_row) {
    const int r = row0 + g + 8 * half_row;
    if (r >= n) continue;
    T* dst = head + static_cast<int64_t>(r) * sr;
    for (int nt = 0; nt < D / 8; ++nt) {
      const uint32_t v = pack2<T>(acc[nt][2 * half_row] * mul, acc[nt][2 * half_row + 1] * mul);
      *reinterpret_cast<uint32_t*>(dst + nt * 8 + 2 * t) = v;
    }
  }
}

template <int D>
constexpr size_t forward_smem() {
  return (size_t{kFwdRows} + 4 * kKeys) * kPitch<D> * 2;
}
template <int D>
constexpr size_t dkdv_smem() {
  constexpr size_t kRows = kDkdvRows<D>;
  return (2 * size_t{kKeys} + 4 * kRows) * kPitch<D> * 2 + 4 * kRows * 4;
}
template <int D>
constexpr size_t dq_smem() {
  return (2 * size_t{kBwdRows} + 4 * kKeys) * kPitch<D> * 2;
}

// ---- block order -------------------------------------------------------------------------
// A causal grid's blocks do unequal work: forward and dq tile x reads x + 1
// key tiles, dkdv tile x reads the query tiles from x on. Blocks are issued
// in linear order (blockIdx.x fastest) as SMs free up, so the ones issued
// last decide when the kernel ends; in natural order, grid (tiles, H, B),
// every head ends with its heaviest tile (forward, dq), and a block issued
// in the last wave may run alone long after the others finish. In
// heaviest-first order the grid is (H, B, tiles) and blockIdx.z counts tiles
// from the heaviest: all heads' heaviest tiles run first and the short ones
// fill the tail (longest-processing-time-first, FlashAttention-3's causal
// schedule). The order is a template parameter of each kernel, so either
// reads its indices straight from blockIdx and costs no registers. A head's tiles then run apart in time, so its streamed
// K/V (or Q/dO) is re-read from L2 only while every head's fits there: the
// launcher picks this order for causal grids whose streamed operands fit in
// half the L2 (HG_FLASH_ORDER=natural|heaviest-first forces one; both give
// identical bits).
struct BlockTile {
  int tile, h, b;
};
// kHeaviestFirst: the grid's order; kHeavyLast: the heaviest tile is the last
// one (forward, dq), else the first (dkdv). A template parameter, not a
// run-time flag, so that neither order costs registers in the kernel.
template <bool kHeaviestFirst, bool kHeavyLast>
__device__ inline BlockTile block_tile() {
  if constexpr (!kHeaviestFirst) {
    return {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z)};
  } else {
    const int rank = static_cast<int>(blockIdx.z);
    return {kHeavyLast ? static_cast<int>(gridDim.z) - 1 - rank : rank, static_cast<int>(blockIdx.x),
            static_cast<int>(blockIdx.y)};
  }
}

// ---- forward -----------------------------------------------------------------------------
// kF: 16-row fragments per warp, so 128 / (16 kF) warps per block. kF = 1 is
// 8 warps x 16 rows; kF = 2 is FlashAttention-2's 4 warps x 32 rows, which
// loads each K and V fragment from shared memory once for two mma's (half the
// ldmatrix traffic per tensor-core instruction) at the cost of twice the
// accumulator registers per thread. The rows' arithmetic is the same either
// way (a warp skips exactly the tiles its fragments cannot see, below), so
// both give identical bits; kFwdFrags picks the default.
template <typename T, int D, bool kHeaviestFirst, int kF>
__global__ void __launch_bounds__(32 * kFwdRows / (16 * kF))
    flash_forward_kernel(Strided<const T> q, Strided<const T> k, Strided<const T> v, Strided<T> out,
                         float* __restrict__ lse, int H, int L, int S, float scale_log2, bool causal) {
  static_assert(kFwdRows % (16 * kF) == 0 && kKeys % (16 * kF) == 0, "a warp's rows never straddle a tile start");
  constexpr int kThreads = 32 * kFwdRows / (16 * kF), kLd = kPitch<D>;
  T* sQ = dynamic_shared<T>();
  T* sKV = sQ + kFwdRows * kLd;  // stage s: K at sKV + 2 s kKeys kLd, V after it
  const BlockTile bt = block_tile<kHeaviestFirst, true>();
  const int b = bt.b, h = bt.h;
  const int q0 = bt.tile * kFwdRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + warp * 16 * kF;  // this warp's first query row; fragment f starts at wrow0 + 16 f
  const T* qh = q.head(b, h);
  const T* kh = k.head(b, h);
  const T* vh = v.head(b, h);
  const int kv_end = causal && q0 + kFwdRows < S ? q0 + kFwdRows : S;
  const int n_tiles = (kv_end + kKeys - 1) / kKeys;

  load_tile_async<kFwdRows, D, kThreads>(sQ, qh, q.sr, q0, L);
  load_pair_async<kKeys, D, kThreads>(sKV, 0, kh, k.sr, vh, v.sr, 0, S);
  cp_async_commit();

  float o[kF][D / 8][4];
  float m[kF][2], l[kF][2];  // per fragment, rows g and g + 8: the running row max of the log2-scaled
                             // scores and this thread's part of the running row sums
#pragma unroll
  for (int f = 0; f < kF; ++f) {
    zero(o[f]);
    m[f][0] = m[f][1] = -INFINITY;
    l[f][0] = l[f][1] = 0.0f;
  }
  for (int j = 0; j < n_tiles; ++j) {
    const int j0 = j * kKeys;
    const T* sK = next_pair_stage<kKeys, D, kThreads>(sKV, j, n_tiles, kh, k.sr, vh, v.sr, j0, S, [] {});
    const T* sV = sK + kKeys * kLd;
    // Some key of the tile is visible to some row of this warp. Then every
    // fragment of the warp sees one: tiles start at multiples of kKeys and a
    // warp's rows at multiples of 16 kF, which divides kKeys, so no tile
    // starts inside a warp's rows.
    if (!(causal && j0 > wrow0 + 16 * kF - 1)) {
      float s[kF][kKeys / 8][4];
#pragma unroll
      for (int f = 0; f < kF; ++f) zero(s[f]);
      gemm_a_bt_f<T, D, kKeys, kF>(s, sQ, warp * 16 * kF, sK, kLd);
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        const int frow0 = wrow0 + 16 * f;
        const bool edge = j0 + kKeys > S || (causal && j0 + kKeys - 1 > frow0);
        float mx[2] = {-INFINITY, -INFINITY};
        for (int nt = 0; nt < kKeys / 8; ++nt) {
          for (int i = 0; i < 4; ++i) {
            float x = s[f][nt][i] * scale_log2;
            if (edge) {
              const int key = j0 + nt * 8 + 2 * t + i % 2, row = frow0 + g + 8 * (i / 2);
              if (key >= S || (causal && key > row)) x = -INFINITY;
            }
            s[f][nt][i] = x;
            mx[i / 2] = fmaxf(mx[i / 2], x);
          }
        }
        float alpha[2], base[2];
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          const float m_new = fmaxf(m[f][r], mx[r]);
          base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with every key so far masked
          alpha[r] = exp2f(m[f][r] - base[r]);
          m[f][r] = m_new;
          l[f][r] *= alpha[r];
        }
        for (int nt = 0; nt < kKeys / 8; ++nt) {
          for (int i = 0; i < 4; ++i) {
            const float p = exp2f(s[f][nt][i] - base[i / 2]);
            s[f][nt][i] = p;
            l[f][i / 2] += p;
          }
        }
        for (int nt = 0; nt < D / 8; ++nt) {
          for (int i = 0; i < 4; ++i) o[f][nt][i] *= alpha[i / 2];
        }
      }
      gemm_p_b_f<T, kKeys, D, kF>(o, s, sV, kLd);
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
#pragma unroll
  for (int f = 0; f < kF; ++f) {
    for (int r = 0; r < 2; ++r) {
      l[f][r] += __shfl_xor_sync(0xffffffffu, l[f][r], 1);
      l[f][r] += __shfl_xor_sync(0xffffffffu, l[f][r], 2);
    }
    const float inv[2] = {1.0f / l[f][0], 1.0f / l[f][1]};
    for (int nt = 0; nt < D / 8; ++nt) {
      for (int i = 0; i < 4; ++i) o[f][nt][i] *= inv[i / 2];
    }
    const int frow0 = wrow0 + 16 * f;
    store_rows<T, D>(out.head(b, h), out.sr, o[f], 1.0f, frow0, L);
    if (t == 0) {
      float* lh = lse + (static_cast<int64_t>(b) * H + h) * L;
      for (int r = 0; r < 2; ++r) {
        const int row = frow0 + g + 8 * r;
        if (row < L) lh[row] = (m[f][r] + log2f(l[f][r])) * kLn2;
      }
    }
  }
}

// ---- backward ----------------------------------------------------------------------------
// delta[(b H + h) L + i] = dO_i . O_i, one warp per row (lanes stride the row,
// then a fixed xor-shuffle tree).
template <typename T, int D>
__global__ void __launch_bounds__(128) flash_delta_kernel(Strided<const T> d_out, Strided<const T> out,
                                                          float* __restrict__ delta, int H, int L, int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float acc = 0.0f;
  if (r < rows) {
    const int i = static_cast<int>(r % L);
    const int bh = static_cast<int>(r / L);
    const T* dor = d_out.head(bh / H, bh % H) + static_cast<int64_t>(i) * d_out.sr;
    const T* orow = out.head(bh / H, bh % H) + static_cast<int64_t>(i) * out.sr;
    for (int c = lane; c < D; c += 32) acc += static_cast<float>(dor[c]) * static_cast<float>(orow[c]);
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (r < rows && lane == 0) delta[r] = acc;
}

// dK, dV for one tile of 64 keys; warp w owns keys [16w, 16w + 16) and works on
// transposed scores: S^T = K Q^T (16 keys x 64 queries), so P^T and dS^T are
// the A operands of dV += P^T dO and dK += dS^T Q without leaving registers.
template <typename T, int D, bool kHeaviestFirst>
__global__ void __launch_bounds__(32 * kBwdWarps)
    flash_backward_dkdv_kernel(Strided<const T> q, Strided<const T> k, Strided<const T> v, Strided<const T> d_out,
                               const float* __restrict__ lse, const float* __restrict__ delta, Strided<T> dk,
                               Strided<T> dv, int H, int L, int S, float scale, bool causal) {
  constexpr int kThreads = 32 * kBwdWarps, kLd = kPitch<D>, kQRows = kDkdvRows<D>;
  T* sK = dynamic_shared<T>();
  T* sV = sK + kKeys * kLd;
  T* sQdO = sV + kKeys * kLd;  // stage s: Q at sQdO + 2 s kQRows kLd, dO after it
  // stage s: lse (log2 units) at sStats + 2 s kQRows, Delta after it
  float* sStats = reinterpret_cast<float*>(sQdO + 4 * kQRows * kLd);
  const BlockTile bt = block_tile<kHeaviestFirst, false>();
  const int b = bt.b, h = bt.h;
  const int k0 = bt.tile * kKeys;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wkey0 = k0 + warp * 16;
  const T* qh = q.head(b, h);
  const T* doh = d_out.head(b, h);
  const int64_t bh = static_cast<int64_t>(b) * H + h;
  const float* lse_h = lse + bh * L;
  const float* delta_h = delta + bh * L;
  const float scale_log2 = scale * kLog2e;
  const int i_begin = causal ? (k0 / kQRows) * kQRows : 0;
  const int n_tiles = i_begin < L ? (L - i_begin + kQRows - 1) / kQRows : 0;

  // lse (in log2 units) and Delta of the Q tile at i0 into stats stage st;
  // padding rows get lse = +inf (P = 0) and Delta = 0.
  auto load_stats = [&](int i0, int st) {
    for (int r = tid; r < kQRows; r += kThreads) {
      const bool valid = i0 + r < L;
      sStats[st * 2 * kQRows + r] = valid ? lse_h[i0 + r] * kLog2e : INFINITY;
      sStats[st * 2 * kQRows + kQRows + r] = valid ? delta_h[i0 + r] : 0.0f;
    }
  };
  load_tile_async<kKeys, D, kThreads>(sK, k.head(b, h), k.sr, k0, S);
  load_tile_async<kKeys, D, kThreads>(sV, v.head(b, h), v.sr, k0, S);
  if (n_tiles > 0) {
    load_pair_async<kQRows, D, kThreads>(sQdO, 0, qh, q.sr, doh, d_out.sr, i_begin, L);
    load_stats(i_begin, 0);
  }
  cp_async_commit();

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
  zero(dk_acc);
  zero(dv_acc);
  for (int j = 0; j < n_tiles; ++j) {
    const int i0 = i_begin + j * kQRows;
    const T* sQ = next_pair_stage<kQRows, D, kThreads>(sQdO, j, n_tiles, qh, q.sr, doh, d_out.sr, i0, L,
                                                       [&] { load_stats(i0 + kQRows, (j + 1) % 2); });
    const T* sdO = sQ + kQRows * kLd;
    const float* sLse = sStats + (j % 2) * 2 * kQRows;
    const float* sDelta = sLse + kQRows;
    if (!(causal && wkey0 > i0 + kQRows - 1)) {  // some query of the tile sees some key of this warp
      const bool edge = causal && wkey0 + 15 > i0;
      float pt[kQRows / 8][4];  // S^T, then P^T
      zero(pt);
      gemm_a_bt<T, D, kQRows>(pt, sK, warp * 16, sQ, kLd);
      for (int nt = 0; nt < kQRows / 8; ++nt) {
        for (int i = 0; i < 4; ++i) {
          const int c = nt * 8 + 2 * t + i % 2;  // query within the tile
          float p = exp2f(pt[nt][i] * scale_log2 - sLse[c]);
          if (edge && wkey0 + g + 8 * (i / 2) > i0 + c) p = 0.0f;
          pt[nt][i] = p;
        }
      }
      float ds[kQRows / 8][4];  // dP^T, then dS^T
      zero(ds);
      gemm_a_bt<T, D, kQRows>(ds, sV, warp * 16, sdO, kLd);
      for (int nt = 0; nt < kQRows / 8; ++nt) {
        for (int i = 0; i < 4; ++i) ds[nt][i] = pt[nt][i] * (ds[nt][i] - sDelta[nt * 8 + 2 * t + i % 2]);
      }
      gemm_p_b<T, kQRows, D>(dv_acc, pt, sdO, kLd);
      gemm_p_b<T, kQRows, D>(dk_acc, ds, sQ, kLd);
    }
    __syncthreads();
  }
  cp_async_wait<0>();  // causal blocks past every query issued the K/V copies only
  store_rows<T, D>(dk.head(b, h), dk.sr, dk_acc, scale, wkey0, S);
  store_rows<T, D>(dv.head(b, h), dv.sr, dv_acc, 1.0f, wkey0, S);
}

// dQ for one tile of 64 queries; warp w owns rows [16w, 16w + 16).
template <typename T, int D, bool kHeaviestFirst>
__global__ void __launch_bounds__(32 * kBwdWarps)
    flash_backward_dq_kernel(Strided<const T> q, Strided<const T> k, Strided<const T> v, Strided<const T> d_out,
                             const float* __restrict__ lse, const float* __restrict__ delta, Strided<T> dq, int H,
                             int L, int S, float scale, bool causal) {
  constexpr int kThreads = 32 * kBwdWarps, kLd = kPitch<D>;
  T* sQ = dynamic_shared<T>();
  T* sdO = sQ + kBwdRows * kLd;
  T* sKV = sdO + kBwdRows * kLd;  // stage s: K at sKV + 2 s kKeys kLd, V after it
  const BlockTile bt = block_tile<kHeaviestFirst, true>();
  const int b = bt.b, h = bt.h;
  const int q0 = bt.tile * kBwdRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + warp * 16;
  const T* kh = k.head(b, h);
  const T* vh = v.head(b, h);
  const int64_t bh = static_cast<int64_t>(b) * H + h;
  const float scale_log2 = scale * kLog2e;
  float row_lse[2], row_delta[2];  // rows g and g + 8; padding rows: P = 0
  for (int r = 0; r < 2; ++r) {
    const int row = wrow0 + g + 8 * r;
    row_lse[r] = row < L ? lse[bh * L + row] * kLog2e : INFINITY;
    row_delta[r] = row < L ? delta[bh * L + row] : 0.0f;
  }
  const int kv_end = causal && q0 + kBwdRows < S ? q0 + kBwdRows : S;
  const int n_tiles = (kv_end + kKeys - 1) / kKeys;

  load_tile_async<kBwdRows, D, kThreads>(sQ, q.head(b, h), q.sr, q0, L);
  load_tile_async<kBwdRows, D, kThreads>(sdO, d_out.head(b, h), d_out.sr, q0, L);
  load_pair_async<kKeys, D, kThreads>(sKV, 0, kh, k.sr, vh, v.sr, 0, S);
  cp_async_commit();

  float dq_acc[D / 8][4];
  zero(dq_acc);
  for (int j = 0; j < n_tiles; ++j) {
    const int j0 = j * kKeys;
    const T* sK = next_pair_stage<kKeys, D, kThreads>(sKV, j, n_tiles, kh, k.sr, vh, v.sr, j0, S, [] {});
    const T* sV = sK + kKeys * kLd;
    if (!(causal && j0 > wrow0 + 15)) {
      const bool edge = j0 + kKeys > S || (causal && j0 + kKeys - 1 > wrow0);
      float p[kKeys / 8][4];  // S, then P
      zero(p);
      gemm_a_bt<T, D, kKeys>(p, sQ, warp * 16, sK, kLd);
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        for (int i = 0; i < 4; ++i) {
          float x = exp2f(p[nt][i] * scale_log2 - row_lse[i / 2]);
          if (edge) {
            const int key = j0 + nt * 8 + 2 * t + i % 2, row = wrow0 + g + 8 * (i / 2);
            if (key >= S || (causal && key > row)) x = 0.0f;
          }
          p[nt][i] = x;
        }
      }
      float ds[kKeys / 8][4];  // dP, then dS
      zero(ds);
      gemm_a_bt<T, D, kKeys>(ds, sdO, warp * 16, sV, kLd);
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        for (int i = 0; i < 4; ++i) ds[nt][i] = p[nt][i] * (ds[nt][i] - row_delta[i / 2]);
      }
      gemm_p_b<T, kKeys, D>(dq_acc, ds, sK, kLd);
    }
    __syncthreads();
  }
  store_rows<T, D>(dq.head(b, h), dq.sr, dq_acc, scale, wrow0, L);
}

// ---- launchers ---------------------------------------------------------------------------
template <typename Kernel>
void allow_smem(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    HG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
}

unsigned tiles(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

// The block order (see block_tile): heaviest-first for causal grids whose
// streamed operands (`streamed_bytes` over all heads) fit in half the L2;
// HG_FLASH_ORDER=natural|heaviest-first (read on every launch) forces one.
// The grid for `n_tiles` tiles per head of H heads and B batches in that order.
dim3 flash_grid(unsigned n_tiles, int64_t h, int64_t b, bool causal, int64_t streamed_bytes, bool* heaviest_first) {
  bool heavy = causal && streamed_bytes <= static_cast<int64_t>(device_properties().l2CacheSize) / 2;
  const char* env = std::getenv("HG_FLASH_ORDER");
  if (env != nullptr && *env != '\0') {
    const std::string value(env);
    HG_CHECK(value == "natural" || value == "heaviest-first", "HG_FLASH_ORDER=", value,
             " is not a block order: use natural or heaviest-first (or leave it unset)");
    heavy = value == "heaviest-first";
  }
  *heaviest_first = heavy && n_tiles <= 65535;  // gridDim.z's limit
  const unsigned hu = static_cast<unsigned>(h), bu = static_cast<unsigned>(b);
  return *heaviest_first ? dim3(hu, bu, n_tiles) : dim3(n_tiles, hu, bu);
}

// Calls fn(std::bool_constant<heaviest_first>{}): the kernel instance of that order.
template <typename Fn>
void with_order(bool heaviest_first, Fn&& fn) {
  if (heaviest_first) {
    fn(std::true_type{});
  } else {
    fn(std::false_type{});
  }
}

// [B, H, N, D] with the last dim contiguous (checked by check_layout).
template <typename T>
Strided<T> strided(const Tensor& x) {
  return Strided<T>{static_cast<T*>(x.data_ptr()), x.stride(0), x.stride(1), x.stride(2)};
}
template <typename T>
Strided<const T> strided_in(const Tensor& x) {
  return Strided<const T>{static_cast<const T*>(x.data_ptr()), x.stride(0), x.stride(1), x.stride(2)};
}

// The forward's row fragments per warp: kFwdFrags, or HG_FLASH_FWD_WARP_ROWS=16|32
// (read on every launch) for 8 warps x 16 rows or 4 warps x 32 rows. D = 128
// always takes 16 rows: with 32, ptxas needs 255 registers on sm_90 and
// spills on sm_80 (its accumulators alone are 2 x (64 + 32) per thread).
int forward_frags() {
  const char* env = std::getenv("HG_FLASH_FWD_WARP_ROWS");
  if (env == nullptr || *env == '\0') return kFwdFrags;
  const std::string value(env);
  HG_CHECK(value == "16" || value == "32", "HG_FLASH_FWD_WARP_ROWS=", value,
           " is not a forward warp shape: use 16 (8 warps x 16 rows) or 32 (4 warps x 32 rows), or leave it unset");
  return value == "16" ? 1 : 2;
}

template <typename T, int D>
void forward_launch(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                    float scale, bool causal, cudaStream_t stream) {
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2);
  constexpr size_t smem = forward_smem<D>();
  bool heavy = false;
  const dim3 grid = flash_grid(tiles(l, kFwdRows), h, b, causal, b * h * s * D * 2 * 2, &heavy);
  const int frags = forward_frags();
  with_order(heavy, [&](auto order) {
    constexpr bool kHeavy = decltype(order)::value;
    auto launch = [&](auto f) {
      constexpr int kF = decltype(f)::value;
      allow_smem(flash_forward_kernel<T, D, kHeavy, kF>, smem);
      HG_LAUNCH((flash_forward_kernel<T, D, kHeavy, kF>), grid, dim3(32 * kFwdRows / (16 * kF)), smem, stream,
                strided_in<T>(q), strided_in<T>(k), strided_in<T>(v), strided<T>(out),
                static_cast<float*>(lse.data_ptr()), static_cast<int>(h), static_cast<int>(l), static_cast<int>(s),
                scale * kLog2e, causal);
    };
    if constexpr (D == 64) {
      if (frags == 2) {
        launch(std::integral_constant<int, 2>{});
        return;
      }
    }
    launch(std::integral_constant<int, 1>{});
  });
}

template <typename T, int D>
void backward_launch(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out, const Tensor& q,
                     const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, float scale, bool causal,
                     cudaStream_t stream) {
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2);
  const Tensor delta = empty({b, h, l}, {.dtype = kF32, .device = q.device()});
  const float* lp = static_cast<const float*>(lse.data_ptr());
  float* dp = static_cast<float*>(delta.data_ptr());
  const int hi = static_cast<int>(h), li = static_cast<int>(l), si = static_cast<int>(s);
  HG_LAUNCH((flash_delta_kernel<T, D>), dim3(tiles(b * h * l, 4)), dim3(128), 0, stream, strided_in<T>(d_out),
            strided_in<T>(out), dp, hi, li, b * h * l);
  constexpr size_t smem_kv = dkdv_smem<D>();
  bool heavy_kv = false;
  const dim3 grid_kv = flash_grid(tiles(s, kKeys), h, b, causal, b * h * l * (D * 2 * 2 + 8), &heavy_kv);
  with_order(heavy_kv, [&](auto order) {
    constexpr bool kHeavy = decltype(order)::value;
    allow_smem(flash_backward_dkdv_kernel<T, D, kHeavy>, smem_kv);
    HG_LAUNCH((flash_backward_dkdv_kernel<T, D, kHeavy>), grid_kv, dim3(32 * kBwdWarps), smem_kv, stream,
              strided_in<T>(q), strided_in<T>(k), strided_in<T>(v), strided_in<T>(d_out), lp, dp, strided<T>(dk),
              strided<T>(dv), hi, li, si, scale, causal);
  });
  constexpr size_t smem_q = dq_smem<D>();
  bool heavy_q = false;
  const dim3 grid_q = flash_grid(tiles(l, kBwdRows), h, b, causal, b * h * s * D * 2 * 2, &heavy_q);
  with_order(heavy_q, [&](auto order) {
    constexpr bool kHeavy = decltype(order)::value;
    allow_smem(flash_backward_dq_kernel<T, D, kHeavy>, smem_q);
    HG_LAUNCH((flash_backward_dq_kernel<T, D, kHeavy>), grid_q, dim3(32 * kBwdWarps), smem_q, stream, strided_in<T>(q),
              strided_in<T>(k), strided_in<T>(v), strided_in<T>(d_out), lp, dp, strided<T>(dq), hi, li, si, scale,
              causal);
  });
}

// Calls fn(T{}, integral_constant<int, D>) for the supported dtypes and head dims.
template <typename Fn>
void dispatch_flash(const char* what, DType dtype, int64_t d, Fn&& fn) {
  HG_CHECK(dtype == kF16 || dtype == kBF16, "cuda::", what, ": tensor cores need f16 or bf16 inputs, got ", dtype);
  HG_CHECK(d == 64 || d == 128, "cuda::", what, ": head dim ", d, " must be 64 or 128");
  auto by_dim = [&](auto tag) {
    if (d == 64) {
      fn(tag, std::integral_constant<int, 64>{});
    } else {
      fn(tag, std::integral_constant<int, 128>{});
    }
  };
  if (dtype == kF16) {
    by_dim(half{});
  } else {
    by_dim(bfloat16{});
  }
}

void check_layout(const char* what, const char* name, const Tensor& x) {
  HG_CHECK(x.dim() == 4 && ops::flash_attention_rows_ok(x), "cuda::", what, ": ", name, " ", x.shape_str(),
           " must be [B, H, N, D] with the head dim contiguous and 16-byte aligned rows");
}

void check_sizes(const char* what, const Tensor& q, const Tensor& k) {
  HG_CHECK(q.size(0) <= 65535 && q.size(1) <= 65535 && q.size(2) < (int64_t{1} << 30) && k.size(2) < (int64_t{1} << 30),
           "cuda::", what, ": wants B, H <= 65535 and L, S < 2^30, got q ", q.shape_str(), " k ", k.shape_str());
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal) {
  const char* what = "flash_attention_forward";
  for (const auto& [name, x] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}}) check_layout(what, name, *x);
  check_sizes(what, q, k);
  HG_CHECK(lse.is_contiguous() && lse.dtype() == kF32, "cuda::", what, ": wants a contiguous f32 lse");
  DeviceGuard guard(q.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_flash(what, q.dtype(), q.size(3), [&](auto tag, auto dim) {
    forward_launch<decltype(tag), decltype(dim)::value>(out, lse, q, k, v, static_cast<float>(scale), causal, stream);
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              double scale, bool causal) {
  const char* what = "flash_attention_backward";
  for (const auto& [name, x] : {std::pair{"q", &q},
                                {"k", &k},
                                {"v", &v},
                                {"out", &out},
                                {"d_out", &d_out},
                                {"dq", &dq},
                                {"dk", &dk},
                                {"dv", &dv}}) {
    check_layout(what, name, *x);
  }
  check_sizes(what, q, k);
  HG_CHECK(lse.is_contiguous() && lse.dtype() == kF32, "cuda::", what, ": wants a contiguous f32 lse");
  DeviceGuard guard(q.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_flash(what, q.dtype(), q.size(3), [&](auto tag, auto dim) {
    backward_launch<decltype(tag), decltype(dim)::value>(dq, dk, dv, d_out, q, k, v, out, lse,
                                                         static_cast<float>(scale), causal, stream);
  });
}

}  // namespace hg::cuda
