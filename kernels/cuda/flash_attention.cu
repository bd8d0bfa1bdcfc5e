// CUDA fused attention (FlashAttention-2 style) on tensor cores, forward and
// backward side by side, then the launchers. Formulas and contract:
// kernels/flash_attention.h; walk-through: docs/kernels.md "Attention: the
// flash kernel". CPU counterpart: kernels/cpu/flash_attention.cpp.
//
// Every GEMM tile is a 16x16x16 WMMA (nvcuda::wmma) product with 16-bit inputs
// and fp32 accumulators. CUDA leaves the fragment's element-to-lane mapping
// unspecified, so nothing here depends on it: row-wise work (mask, softmax,
// dS) goes through shared memory (store_matrix_sync, then two threads own one
// row, 32 columns each), and accumulator fragments are only filled, mma'd,
// scaled uniformly and stored.
//
// Tiles: kBr = 64 query rows and kBc = 64 key rows per block, 4 warps
// (128 threads); warp w owns rows [16w, 16w + 16) of the block's tile in every
// product, and thread t owns row t / 2 (the same warp's rows), so only the
// K/V (or Q/dO) tile loads need __syncthreads; the rest is __syncwarp.
//
// flash_forward_kernel<T, D>                 | flash_backward_dkdv_kernel<T, D> + flash_backward_dq_kernel<T, D>
//   formula  S = scale Q K^T (masked),       |   P = exp(S - lse) (recomputed), D_i = dO_i . O_i,
//            online softmax per K/V tile:    |   dP = dO V^T, dS = P (dP - D_i);
//            m' = max(m, rowmax S~),         |   dkdv: dV_j = sum_i P_ij dO_i, dK_j = scale sum_i dS_ij Q_i
//            l = l e^(m-m') + rowsum e^(S~-m')|  dq:   dQ_i = scale sum_j dS_ij K_j
//            O = O e^(m-m') + e^(S~-m') V    |   (two kernels: each output has one owner, no atomics)
//            out = O / l, lse = m + log l    |
//   split    grid (ceil(L/64), B*H): one     |   dkdv: grid (ceil(S/64), B*H), one K/V tile per block,
//            Q tile per block, K/V tiles     |         Q/dO tiles streamed; dq: grid (ceil(L/64), B*H),
//            streamed (causal: only tiles    |         one Q/dO tile per block, K/V tiles streamed
//            left of the diagonal)           |   (causal: only tiles on or below the diagonal)
//   launch   128 threads, dynamic shared     |   128 threads each; flash_delta_kernel (D_i) first:
//                                            |   one warp per row, 4 rows per block
//   shared   Q, K, V tiles (3 x 64 D x 2 B), |   dkdv: K, V, Q, dO tiles (4 x 64 D x 2 B), S^T and dP^T
//            S/PV scratch 64 max(64, D) x 4, |         (2 x 64 x 64 x 4), P^T and dS^T (2 x 64 x 64 x 2),
//            P 64 x 64 x 2:                  |         lse, D (2 x 64 x 4): 80.5 KiB (D=64), 112.5 KiB (128)
//            48 KiB (D=64), 88 KiB (D=128)   |   dq:   Q, dO, K, V tiles, S, dP (2 x 64 x 64 x 4), dS (64 x 64 x 2):
//                                            |         72 KiB (D=64), 104 KiB (D=128)   (opt-in above 48 KiB)
//   bytes    reads Q once, K and V once per  |   dkdv reads K, V once and Q, dO, lse, D once per K/V tile;
//            Q tile: 2 (L D + ceil(L/64) 2 S D)| dq reads Q, dO once and K, V once per Q tile; writes
//            writes out (2 L D) + lse (4 L)  |   dq, dk, dv (2 (L + 2 S) D); D_i: reads dO, O, writes 4 L
//            per head; never an L x S matrix |   per head; never an L x S matrix
//   precision scores, m, l, O in fp32; P    |   scores, P, dP, D_i and all accumulators fp32; P and dS
//            rounded to T for P V (as FA2); |   rounded to T for the tensor-core products; outputs
//            out rounded once; lse fp32      |   rounded once
//
// Shared memory above 48 KiB needs cudaFuncSetAttribute (done by the
// launchers); the backward's 112.5 KiB (D = 128) fits sm_80 and sm_90
// (163 / 227 KiB) but not sm_86/sm_89 (99 KiB): there the launch reports an
// hg::Error naming the kernel.
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>

#include "runtime/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/flash_attention.h"

namespace hg::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBr = 64;  // query rows per tile
constexpr int kBc = 64;  // key rows per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// The WMMA element type of a storage type (same 2-byte layout).
template <typename T>
struct WmmaOf;
template <>
struct WmmaOf<half> {
  using type = __half;
};
template <>
struct WmmaOf<bfloat16> {
  using type = __nv_bfloat16;
};

template <typename W>
__device__ __forceinline__ W from_f(float x);
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename W>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major>;
template <typename W>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major>;
template <typename W>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Copies rows [row0, row0 + kRows) of a [n, D] matrix into a [kRows, D] tile,
// zero rows past n. All threads of the block.
template <int kRows, int D, typename W>
__device__ void load_tile(W* tile, const W* src, int row0, int n) {
  for (int e = static_cast<int>(threadIdx.x); e < kRows * D; e += kThreads) {
    const int r = e / D;
    tile[e] = row0 + r < n ? src[static_cast<int64_t>(row0 + r) * D + e % D] : from_f<W>(0.0f);
  }
}

// out[16, 16 n] (this warp's rows, ld ldo) = A[16, K] (ld lda) x B, with B
// [K, 16 n] row-major (ld ldb) or, when kBT, B = Bt^T for Bt [16 n, K] row-major.
template <int kK, int kN, bool kBT, typename W>
__device__ void warp_gemm_store(float* out, int ldo, const W* a, int lda, const W* b, int ldb) {
  for (int n = 0; n < kN / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < kK / 16; ++kk) {
      FragA<W> fa;
      wmma::load_matrix_sync(fa, a + kk * 16, lda);
      if constexpr (kBT) {
        FragBCol<W> fb;
        wmma::load_matrix_sync(fb, b + n * 16 * ldb + kk * 16, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      } else {
        FragBRow<W> fb;
        wmma::load_matrix_sync(fb, b + kk * 16 * ldb + n * 16, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
    }
    wmma::store_matrix_sync(out + n * 16, acc, ldo, wmma::mem_row_major);
  }
}

// acc[n] += A[16, K] (ld lda) x B[K, 16 n] row-major (ld ldb).
template <int kK, int kN, typename W>
__device__ void warp_gemm_acc(FragC (&acc)[kN / 16], const W* a, int lda, const W* b, int ldb) {
  for (int kk = 0; kk < kK / 16; ++kk) {
    FragA<W> fa;
    wmma::load_matrix_sync(fa, a + kk * 16, lda);
    for (int n = 0; n < kN / 16; ++n) {
      FragBRow<W> fb;
      wmma::load_matrix_sync(fb, b + kk * 16 * ldb + n * 16, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// Writes this warp's accumulators (rows [row0, row0 + 16) of a [n, D] output,
// times `mul`) through a 16 x 16 float scratch of the warp (ld 16 * k >= 16).
template <int D, typename T>
__device__ void warp_store_rows(T* dst, const FragC (&acc)[D / 16], float mul, float* scratch, int ld, int row0,
                                int n) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int c = 0; c < D / 16; ++c) {
    FragC f = acc[c];
    for (int i = 0; i < f.num_elements; ++i) f.x[i] *= mul;
    __syncwarp();
    wmma::store_matrix_sync(scratch, f, ld, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = e / 16;
      if (row0 + r < n) {
        dst[static_cast<int64_t>(row0 + r) * D + c * 16 + e % 16] = static_cast<T>(scratch[r * ld + e % 16]);
      }
    }
  }
}

constexpr size_t forward_smem(int d) {
  return (3 * size_t{kBr} * d) * 2 + size_t{kBr} * (d > kBc ? d : kBc) * 4 + size_t{kBr} * kBc * 2;
}
constexpr size_t dkdv_smem(int d) {
  return (4 * size_t{kBr} * d) * 2 + 2 * size_t{kBc} * kBr * 4 + 2 * size_t{kBc} * kBr * 2 + 2 * size_t{kBr} * 4;
}
constexpr size_t dq_smem(int d) {
  return (4 * size_t{kBr} * d) * 2 + 2 * size_t{kBr} * kBc * 4 + size_t{kBr} * kBc * 2;
}

// ---- forward -----------------------------------------------------------------------------
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                         float* __restrict__ lse, int L, int S, float scale, bool causal) {
  using W = typename WmmaOf<T>::type;
  constexpr int kLd = D > kBc ? D : kBc;  // scratch row length: S tile, then the P V tile
  W* sQ = dynamic_shared<W>();
  W* sK = sQ + kBr * D;
  W* sV = sK + kBc * D;
  float* sS = reinterpret_cast<float*>(sV + kBc * D);
  W* sP = reinterpret_cast<W*>(sS + kBr * kLd);
  const int64_t bh = blockIdx.y;
  const int q0 = static_cast<int>(blockIdx.x) * kBr;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32;
  const int row = tid / 2, part = tid % 2, qi = q0 + row;
  const W* qb = reinterpret_cast<const W*>(q) + bh * L * D;
  const W* kb = reinterpret_cast<const W*>(k) + bh * S * D;
  const W* vb = reinterpret_cast<const W*>(v) + bh * S * D;
  load_tile<kBr, D>(sQ, qb, q0, L);

  float m = -INFINITY, lsum = 0.0f;
  float o[D / 2];
  for (int c = 0; c < D / 2; ++c) o[c] = 0.0f;
  const int kv_end = causal ? (S < q0 + kBr ? S : q0 + kBr) : S;
  for (int j0 = 0; j0 < kv_end; j0 += kBc) {
    __syncthreads();  // the previous tile's K, V are no longer read
    load_tile<kBc, D>(sK, kb, j0, S);
    load_tile<kBc, D>(sV, vb, j0, S);
    __syncthreads();
    // S = Q K^T for this warp's 16 query rows.
    warp_gemm_store<D, kBc, true>(sS + warp * 16 * kLd, kLd, sQ + warp * 16 * D, D, sK, D);
    __syncwarp();
    // Online softmax of this thread's half row.
    float* srow = sS + row * kLd;
    float mx = -INFINITY;
    for (int c = part * 32; c < part * 32 + 32; ++c) {
      const int j = j0 + c;
      const float s = (j < S && !(causal && j > qi)) ? srow[c] * scale : -INFINITY;
      srow[c] = s;
      mx = fmaxf(mx, s);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    const bool empty = m_new == -INFINITY;  // every key so far masked (padding rows only)
    const float alpha = empty ? 1.0f : expf(m - m_new);
    float psum = 0.0f;
    for (int c = part * 32; c < part * 32 + 32; ++c) {
      const float p = empty ? 0.0f : expf(srow[c] - m_new);
      sP[row * kBc + c] = from_f<W>(p);
      psum += p;
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    lsum = lsum * alpha + psum;
    m = m_new;
    for (int c = 0; c < D / 2; ++c) o[c] *= alpha;
    __syncwarp();
    // P V into the scratch (the S tile is consumed), then O += P V.
    warp_gemm_store<kBc, D, false>(sS + warp * 16 * kLd, kLd, sP + warp * 16 * kBc, kBc, sV, D);
    __syncwarp();
    for (int c = 0; c < D / 2; ++c) o[c] += sS[row * kLd + part * (D / 2) + c];
  }
  if (qi < L) {
    const float inv = 1.0f / lsum;
    T* orow = out + (bh * L + qi) * D + part * (D / 2);
    for (int c = 0; c < D / 2; ++c) orow[c] = static_cast<T>(o[c] * inv);
    if (part == 0) lse[bh * L + qi] = m + logf(lsum);
  }
}

// ---- backward ----------------------------------------------------------------------------
// delta[r] = dO_r . O_r, one warp per row (lanes stride the row, then a fixed
// xor-shuffle tree).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_delta_kernel(const T* __restrict__ d_out, const T* __restrict__ out,
                                                               float* __restrict__ delta, int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float acc = 0.0f;
  if (r < rows) {
    for (int c = lane; c < D; c += 32) acc += static_cast<float>(d_out[r * D + c]) * static_cast<float>(out[r * D + c]);
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (r < rows && lane == 0) delta[r] = acc;
}

// dK, dV for one K/V tile; warp w owns key rows [16w, 16w + 16).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                               const T* __restrict__ d_out, const float* __restrict__ lse,
                               const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv, int L, int S,
                               float scale, bool causal) {
  using W = typename WmmaOf<T>::type;
  W* sK = dynamic_shared<W>();
  W* sV = sK + kBc * D;
  W* sQ = sV + kBc * D;
  W* sdO = sQ + kBr * D;
  float* sST = reinterpret_cast<float*>(sdO + kBr * D);  // [kBc][kBr]: S^T
  float* sdPT = sST + kBc * kBr;                         // [kBc][kBr]: dP^T
  W* sPT = reinterpret_cast<W*>(sdPT + kBc * kBr);       // [kBc][kBr]: P^T
  W* sdST = sPT + kBc * kBr;                             // [kBc][kBr]: dS^T
  float* sLse = reinterpret_cast<float*>(sdST + kBc * kBr);
  float* sDelta = sLse + kBr;
  const int64_t bh = blockIdx.y;
  const int k0 = static_cast<int>(blockIdx.x) * kBc;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32;
  const int row = tid / 2, part = tid % 2, kj = k0 + row;
  const W* qb = reinterpret_cast<const W*>(q) + bh * L * D;
  const W* dob = reinterpret_cast<const W*>(d_out) + bh * L * D;
  load_tile<kBc, D>(sK, reinterpret_cast<const W*>(k) + bh * S * D, k0, S);
  load_tile<kBc, D>(sV, reinterpret_cast<const W*>(v) + bh * S * D, k0, S);

  FragC acc_dk[D / 16], acc_dv[D / 16];
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(acc_dk[n], 0.0f);
    wmma::fill_fragment(acc_dv[n], 0.0f);
  }
  for (int i0 = causal ? (k0 / kBr) * kBr : 0; i0 < L; i0 += kBr) {
    __syncthreads();  // the previous Q, dO tiles are no longer read
    load_tile<kBr, D>(sQ, qb, i0, L);
    load_tile<kBr, D>(sdO, dob, i0, L);
    for (int r = tid; r < kBr; r += kThreads) {
      sLse[r] = i0 + r < L ? lse[bh * L + i0 + r] : INFINITY;  // padding rows: P = 0
      sDelta[r] = i0 + r < L ? delta[bh * L + i0 + r] : 0.0f;
    }
    __syncthreads();
    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 key rows.
    warp_gemm_store<D, kBr, true>(sST + warp * 16 * kBr, kBr, sK + warp * 16 * D, D, sQ, D);
    warp_gemm_store<D, kBr, true>(sdPT + warp * 16 * kBr, kBr, sV + warp * 16 * D, D, sdO, D);
    __syncwarp();
    for (int c = part * 32; c < part * 32 + 32; ++c) {
      const int qi = i0 + c;
      const bool valid = kj < S && qi < L && !(causal && kj > qi);
      const float p = valid ? expf(sST[row * kBr + c] * scale - sLse[c]) : 0.0f;
      sPT[row * kBr + c] = from_f<W>(p);
      sdST[row * kBr + c] = from_f<W>(p * (sdPT[row * kBr + c] - sDelta[c]));
    }
    __syncwarp();
    warp_gemm_acc<kBr, D>(acc_dv, sPT + warp * 16 * kBr, kBr, sdO, D);
    warp_gemm_acc<kBr, D>(acc_dk, sdST + warp * 16 * kBr, kBr, sQ, D);
  }
  float* scratch = sST + warp * 16 * kBr;  // this warp's rows: free after its last product
  warp_store_rows<D>(dk + bh * S * D, acc_dk, scale, scratch, kBr, k0 + warp * 16, S);
  warp_store_rows<D>(dv + bh * S * D, acc_dv, 1.0f, scratch, kBr, k0 + warp * 16, S);
}

// dQ for one Q tile; warp w owns query rows [16w, 16w + 16).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             const T* __restrict__ d_out, const float* __restrict__ lse,
                             const float* __restrict__ delta, T* __restrict__ dq, int L, int S, float scale,
                             bool causal) {
  using W = typename WmmaOf<T>::type;
  W* sQ = dynamic_shared<W>();
  W* sdO = sQ + kBr * D;
  W* sK = sdO + kBr * D;
  W* sV = sK + kBc * D;
  float* sS = reinterpret_cast<float*>(sV + kBc * D);  // [kBr][kBc]
  float* sdP = sS + kBr * kBc;                         // [kBr][kBc]
  W* sdS = reinterpret_cast<W*>(sdP + kBr * kBc);      // [kBr][kBc]
  const int64_t bh = blockIdx.y;
  const int q0 = static_cast<int>(blockIdx.x) * kBr;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32;
  const int row = tid / 2, part = tid % 2, qi = q0 + row;
  const W* kb = reinterpret_cast<const W*>(k) + bh * S * D;
  const W* vb = reinterpret_cast<const W*>(v) + bh * S * D;
  load_tile<kBr, D>(sQ, reinterpret_cast<const W*>(q) + bh * L * D, q0, L);
  load_tile<kBr, D>(sdO, reinterpret_cast<const W*>(d_out) + bh * L * D, q0, L);
  const float row_lse = qi < L ? lse[bh * L + qi] : INFINITY;
  const float row_delta = qi < L ? delta[bh * L + qi] : 0.0f;

  FragC acc_dq[D / 16];
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(acc_dq[n], 0.0f);
  const int kv_end = causal ? (S < q0 + kBr ? S : q0 + kBr) : S;
  for (int j0 = 0; j0 < kv_end; j0 += kBc) {
    __syncthreads();
    load_tile<kBc, D>(sK, kb, j0, S);
    load_tile<kBc, D>(sV, vb, j0, S);
    __syncthreads();
    warp_gemm_store<D, kBc, true>(sS + warp * 16 * kBc, kBc, sQ + warp * 16 * D, D, sK, D);
    warp_gemm_store<D, kBc, true>(sdP + warp * 16 * kBc, kBc, sdO + warp * 16 * D, D, sV, D);
    __syncwarp();
    for (int c = part * 32; c < part * 32 + 32; ++c) {
      const int j = j0 + c;
      const bool valid = j < S && !(causal && j > qi);
      const float p = valid ? expf(sS[row * kBc + c] * scale - row_lse) : 0.0f;
      sdS[row * kBc + c] = from_f<W>(p * (sdP[row * kBc + c] - row_delta));
    }
    __syncwarp();
    warp_gemm_acc<kBc, D>(acc_dq, sdS + warp * 16 * kBc, kBc, sK, D);
  }
  warp_store_rows<D>(dq + bh * L * D, acc_dq, scale, sS + warp * 16 * kBc, kBc, q0 + warp * 16, L);
}

// ---- launchers ---------------------------------------------------------------------------
template <typename Kernel>
void allow_smem(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    HG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
}

unsigned tiles(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

template <typename T, int D>
void forward_launch(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                    float scale, bool causal, cudaStream_t stream) {
  const int64_t bh = q.size(0), l = q.size(1), s = k.size(1);
  constexpr size_t smem = forward_smem(D);
  allow_smem(flash_forward_kernel<T, D>, smem);
  HG_LAUNCH((flash_forward_kernel<T, D>), dim3(tiles(l, kBr), static_cast<unsigned>(bh)), dim3(kThreads), smem, stream,
            static_cast<const T*>(q.data_ptr()), static_cast<const T*>(k.data_ptr()),
            static_cast<const T*>(v.data_ptr()), static_cast<T*>(out.data_ptr()), static_cast<float*>(lse.data_ptr()),
            static_cast<int>(l), static_cast<int>(s), scale, causal);
}

template <typename T, int D>
void backward_launch(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out, const Tensor& q,
                     const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, float scale, bool causal,
                     cudaStream_t stream) {
  const int64_t bh = q.size(0), l = q.size(1), s = k.size(1);
  const Tensor delta = empty({bh, l}, {.dtype = kF32, .device = q.device()});
  const T* qp = static_cast<const T*>(q.data_ptr());
  const T* kp = static_cast<const T*>(k.data_ptr());
  const T* vp = static_cast<const T*>(v.data_ptr());
  const T* dop = static_cast<const T*>(d_out.data_ptr());
  const float* lp = static_cast<const float*>(lse.data_ptr());
  float* dp = static_cast<float*>(delta.data_ptr());
  HG_LAUNCH((flash_delta_kernel<T, D>), dim3(tiles(bh * l, kWarps)), dim3(kThreads), 0, stream, dop,
            static_cast<const T*>(out.data_ptr()), dp, bh * l);
  constexpr size_t smem_kv = dkdv_smem(D);
  allow_smem(flash_backward_dkdv_kernel<T, D>, smem_kv);
  HG_LAUNCH((flash_backward_dkdv_kernel<T, D>), dim3(tiles(s, kBc), static_cast<unsigned>(bh)), dim3(kThreads), smem_kv,
            stream, qp, kp, vp, dop, lp, dp, static_cast<T*>(dk.data_ptr()), static_cast<T*>(dv.data_ptr()),
            static_cast<int>(l), static_cast<int>(s), scale, causal);
  constexpr size_t smem_q = dq_smem(D);
  allow_smem(flash_backward_dq_kernel<T, D>, smem_q);
  HG_LAUNCH((flash_backward_dq_kernel<T, D>), dim3(tiles(l, kBr), static_cast<unsigned>(bh)), dim3(kThreads), smem_q,
            stream, qp, kp, vp, dop, lp, dp, static_cast<T*>(dq.data_ptr()), static_cast<int>(l), static_cast<int>(s),
            scale, causal);
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

void check_sizes(const char* what, const Tensor& q, const Tensor& k) {
  HG_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(1) <= (int64_t{1} << 30) && k.size(1) <= (int64_t{1} << 30) &&
               q.size(0) <= 65535,
           "cuda::", what, ": wants [BH, L, D] with BH <= 65535 and L, S < 2^30, got q ", q.shape_str(), " k ",
           k.shape_str());
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal) {
  check_sizes("flash_attention_forward", q, k);
  HG_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous() && lse.is_contiguous() &&
               lse.dtype() == kF32,
           "cuda::flash_attention_forward: wants contiguous inputs and an f32 lse");
  DeviceGuard guard(q.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_flash("flash_attention_forward", q.dtype(), q.size(2), [&](auto tag, auto dim) {
    forward_launch<decltype(tag), decltype(dim)::value>(out, lse, q, k, v, static_cast<float>(scale), causal, stream);
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              double scale, bool causal) {
  check_sizes("flash_attention_backward", q, k);
  HG_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous() &&
               d_out.is_contiguous() && dq.is_contiguous() && dk.is_contiguous() && dv.is_contiguous() &&
               lse.is_contiguous() && lse.dtype() == kF32,
           "cuda::flash_attention_backward: wants contiguous tensors and an f32 lse");
  DeviceGuard guard(q.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_flash("flash_attention_backward", q.dtype(), q.size(2), [&](auto tag, auto dim) {
    backward_launch<decltype(tag), decltype(dim)::value>(dq, dk, dv, d_out, q, k, v, out, lse,
                                                         static_cast<float>(scale), causal, stream);
  });
}

}  // namespace hg::cuda
