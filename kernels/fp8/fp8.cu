// CUDA fp8 kernels (Note [fp8 scaled casts], Note [fp8 GEMM] in
// kernels/fp8/fp8.h). The CPU oracle is kernels/fp8/fp8_cpu.cpp; the element rules
// (saturating RNE conversion, the block scale, |x| bits) are the shared
// HG_HOST_DEVICE helpers, so both backends give the same bits.
//
// fp8_cast_kernel<S, Q, kWrite>
//   formula    q[i] = sat_Q(x[i] * scale[0]) (kWrite) and amax = max_i |x[i]|
//              as the bits of |x| (NaN > inf > finite: unsigned order);
//              with a counter, += the number of clipped elements
//              (fp8_clips: finite x whose x * scale rounds beyond fp8_max)
//   split      grid-stride over the n elements; each thread keeps its max
//              (and count), block_allreduce, one atomicMax per block into
//              amax's bits (zeroed by a cudaMemsetAsync on the same stream
//              first) and one atomicAdd of a nonzero count
//   launch     256 threads, min(ceil(n / 256), 4096) blocks
//   bytes      n * sizeof(S) read, n written (kWrite), 4 (+8) bytes per block
//   precision  one f32 multiply and one rounding to Q per element; amax exact
//
// fp8_cast_block_kernel<S, Q, kTile>
//   formula    per block b (1 x 128 row segment, or a 128 x 128 tile):
//              s_b = fp8_block_scale(max |x| over b), q = sat_Q(x * s_b),
//              scale_inv[b] = 1 / s_b
//   split      1 x 128: one warp per segment (4 elements a lane, 8 segments
//              per 256-thread block), warp_allreduce; 128 x 128: one 256-thread
//              block per tile, 64 elements a thread, block_allreduce, then a
//              second sweep over the tile (L1/L2-resident) to cast
//   launch     1 x 128: ceil(segments / 8) blocks; 128 x 128: one per tile
//   bytes      sizeof(S) read (twice for tiles, the second from cache) and 1
//              written per element, 4 per block of scale_inv
//   precision  as above; s_b is an f32 division, 1/s_b another
//
// fp8_dequantize_kernel<Q, O>
//   formula    out[i] = round_O(float(q[i]) * scale_inv[block of i])
//   split      grid-stride, 256 threads
//   bytes      1 read + sizeof(O) written per element
//
// fp8_update_scales_kernel
//   formula    fp8_update_slot per slot (Note [fp8 delayed scaling] in
//              kernels/fp8/fp8.h); the whole launch returns when found_inf != 0
//   split      one thread per slot, 256 threads a block
//   bytes      per slot ~2 L * 4 bytes of history read and L * 4 written,
//              16 bytes of scale/scale_inv/max; no host read
//
// fp8_linear: cuBLASLt (cuda::gemm_lt with fp8 operand dtypes and device
//   scale pointers); 2 M N K FLOPs, M K + N K bytes read, M N sizeof(O)
//   written; needs compute capability 8.9+.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/convert.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/fp8/fp8.h"
#include "kernels/gemm/gemm.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

struct MaxBits {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

struct SumCount {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a + b; }
};

template <typename S, typename Q, bool kWrite>
__global__ void fp8_cast_kernel(const S* x, Q* q, int64_t n, const float* scale, uint32_t* amax_bits,
                                unsigned long long* saturated) {
  __shared__ uint32_t partials[kThreads / kWarpSize];
  const float s = kWrite ? *scale : 1.0f;
  uint32_t best = 0, clipped = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = static_cast<float>(x[i]);
    best = MaxBits{}(best, fp8_abs_bits(v));
    if constexpr (kWrite) {
      q[i] = fp8_quantize<Q>(v, s);
      clipped += fp8_clips<Q>(v, s) ? 1u : 0u;
    }
  }
  best = block_allreduce(best, MaxBits{}, partials);
  if (threadIdx.x == 0 && best != 0) atomicMax(amax_bits, best);
  if (saturated != nullptr) {
    clipped = block_allreduce(clipped, SumCount{}, partials);
    if (threadIdx.x == 0 && clipped != 0) atomicAdd(saturated, static_cast<unsigned long long>(clipped));
  }
}

template <typename S, typename Q>
__global__ void fp8_cast_row_block_kernel(const S* x, Q* q, float* scale_inv, Fp8BlockArgs g, float max_finite) {
  const int64_t segment = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarpSize) + threadIdx.x / kWarpSize;
  if (segment >= g.grid_rows * g.grid_cols) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int64_t r = segment / g.grid_cols, c0 = (segment % g.grid_cols) * kFp8BlockCols;
  const int64_t width = min64(kFp8BlockCols, g.cols - c0);
  const S* in = x + r * g.cols + c0;
  float v[kFp8BlockCols / kWarpSize];
  uint32_t best = 0;
#pragma unroll
  for (int j = 0; j < kFp8BlockCols / kWarpSize; ++j) {
    const int64_t c = lane + j * kWarpSize;
    v[j] = c < width ? static_cast<float>(in[c]) : 0.0f;
    best = MaxBits{}(best, fp8_abs_bits(v[j]));
  }
  best = warp_allreduce(best, MaxBits{});
  const float s = fp8_block_scale(hg::detail::bits_float(best), max_finite);
  Q* out = q + r * g.cols + c0;
#pragma unroll
  for (int j = 0; j < kFp8BlockCols / kWarpSize; ++j) {
    const int64_t c = lane + j * kWarpSize;
    if (c < width) out[c] = fp8_quantize<Q>(v[j], s);
  }
  if (lane == 0) scale_inv[segment] = 1.0f / s;
}

template <typename S, typename Q>
__global__ void fp8_cast_tile_kernel(const S* x, Q* q, float* scale_inv, Fp8BlockArgs g, float max_finite) {
  __shared__ uint32_t partials[kThreads / kWarpSize];
  const int64_t br = blockIdx.x / g.grid_cols, bc = blockIdx.x % g.grid_cols;
  const int64_t r0 = br * 128, c0 = bc * kFp8BlockCols;
  const int64_t h = min64(128, g.rows - r0), w = min64(kFp8BlockCols, g.cols - c0);
  uint32_t best = 0;
  for (int64_t e = threadIdx.x; e < h * w; e += kThreads) {
    best = MaxBits{}(best, fp8_abs_bits(static_cast<float>(x[(r0 + e / w) * g.cols + c0 + e % w])));
  }
  best = block_allreduce(best, MaxBits{}, partials);
  const float s = fp8_block_scale(hg::detail::bits_float(best), max_finite);
  for (int64_t e = threadIdx.x; e < h * w; e += kThreads) {
    const int64_t at = (r0 + e / w) * g.cols + c0 + e % w;
    q[at] = fp8_quantize<Q>(static_cast<float>(x[at]), s);
  }
  if (threadIdx.x == 0) scale_inv[blockIdx.x] = 1.0f / s;
}

__global__ void fp8_update_scales_kernel(Fp8UpdateArgs a) {
  if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= a.n) return;
  fp8_update_slot(a.history, a.length, a.n, slot, a.scale, a.scale_inv, a.max_finite, a.margin_factor, a.compute);
}

template <typename Q, typename O>
__global__ void fp8_dequantize_kernel(const Q* q, O* out, int64_t n, const float* scale_inv, Fp8BlockArgs g,
                                      bool blockwise) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float s =
        blockwise ? scale_inv[(i / g.cols / g.block_rows) * g.grid_cols + (i % g.cols) / kFp8BlockCols] : *scale_inv;
    out[i] = convert_value<O>(static_cast<float>(q[i]) * s);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// amax = max |x| (written; the cast kernels combine blocks with atomicMax).
template <typename Q, bool kWrite>
void run_cast(const Tensor& q, const Tensor& x, const Tensor& scale, const Tensor& amax, const Tensor& saturated) {
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  HG_CUDA_CHECK(cudaMemsetAsync(amax.data_ptr(), 0, sizeof(float), stream));
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_fp8_source(x.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    HG_LAUNCH((fp8_cast_kernel<S, Q, kWrite>), dim3(grid_for(n)), dim3(kThreads), 0, stream,
              static_cast<const S*>(x.data_ptr()), kWrite ? static_cast<Q*>(q.data_ptr()) : nullptr, n,
              kWrite ? static_cast<const float*>(scale.data_ptr()) : nullptr, static_cast<uint32_t*>(amax.data_ptr()),
              saturated.defined() ? static_cast<unsigned long long*>(saturated.data_ptr()) : nullptr);
  });
}

}  // namespace

void fp8_update_scales_(const Fp8UpdateArgs& args, Device device) {
  DeviceGuard guard(device.index);
  HG_LAUNCH(fp8_update_scales_kernel, dim3(static_cast<unsigned>((args.n + kThreads - 1) / kThreads)), dim3(kThreads),
            0, current_stream().handle(), args);
}

void fp8_cast(const Tensor& q, const Tensor& x, const Tensor& scale, const Tensor& amax, const Tensor& saturated) {
  dispatch_fp8(q.dtype(), [&](auto q_tag) { run_cast<decltype(q_tag), true>(q, x, scale, amax, saturated); });
}

void fp8_amax(const Tensor& x, const Tensor& amax) {
  run_cast<float8_e4m3, false>(Tensor(), x, Tensor(), amax, Tensor());
}

void fp8_cast_blockwise(const Tensor& q, const Tensor& scale_inv, const Tensor& x, const Fp8BlockArgs& g) {
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  const float max_finite = fp8_max(q.dtype());
  dispatch_fp8_source(x.dtype(), [&](auto s_tag) {
    using S = decltype(s_tag);
    dispatch_fp8(q.dtype(), [&](auto q_tag) {
      using Q = decltype(q_tag);
      const auto* in = static_cast<const S*>(x.data_ptr());
      auto* out = static_cast<Q*>(q.data_ptr());
      auto* inv = static_cast<float*>(scale_inv.data_ptr());
      const int64_t blocks = g.grid_rows * g.grid_cols;
      if (g.block_rows == 1) {
        constexpr int64_t kSegmentsPerBlock = kThreads / kWarpSize;
        HG_LAUNCH((fp8_cast_row_block_kernel<S, Q>),
                  dim3(static_cast<unsigned>((blocks + kSegmentsPerBlock - 1) / kSegmentsPerBlock)), dim3(kThreads), 0,
                  stream, in, out, inv, g, max_finite);
      } else {
        HG_LAUNCH((fp8_cast_tile_kernel<S, Q>), dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, in, out,
                  inv, g, max_finite);
      }
    });
  });
}

void fp8_dequantize(const Tensor& out, const Tensor& q, const Tensor& scale_inv, const Fp8BlockArgs* g) {
  const int64_t n = q.numel();
  if (n == 0) return;
  DeviceGuard guard(q.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_fp8(q.dtype(), [&](auto q_tag) {
    using Q = decltype(q_tag);
    dispatch_floating(out.dtype(), "fp8_dequantize", [&](auto o_tag) {
      using O = decltype(o_tag);
      HG_LAUNCH((fp8_dequantize_kernel<Q, O>), dim3(grid_for(n)), dim3(kThreads), 0, stream,
                static_cast<const Q*>(q.data_ptr()), static_cast<O*>(out.data_ptr()), n,
                static_cast<const float*>(scale_inv.data_ptr()), g != nullptr ? *g : Fp8BlockArgs{}, g != nullptr);
    });
  });
}

void fp8_linear(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, const Tensor& bias) {
  const int device = a.device().index;
  const cudaDeviceProp& p = device_properties(device);
  HG_CHECK(p.major * 10 + p.minor >= 89, "fp8_linear: fp8 GEMMs need compute capability 8.9 or newer (Ada, Hopper); ",
           p.name, " is ", p.major, ".", p.minor,
           ". Keep the layer in bf16 (amp::supported(device, kF8E4M3) is false)");
  GemmArgs g;
  g.dtype = out.dtype();
  g.a_dtype = a.dtype();
  g.b_dtype = b.dtype();
  g.trans_a = false;
  g.trans_b = true;
  g.m = a.size(0);
  g.n = b.size(0);
  g.k = a.size(1);
  g.a = a.data_ptr();
  g.lda = g.k;
  g.b = b.data_ptr();
  g.ldb = g.k;
  g.c = out.data_ptr();
  g.ldc = g.n;
  g.device_index = device;
  g.scale_a = static_cast<const float*>(a_scale_inv.data_ptr());
  g.scale_b = static_cast<const float*>(b_scale_inv.data_ptr());
  if (bias.defined()) {
    g.epilogue = GemmEpilogue::bias;
    g.bias = bias.data_ptr();
  }
  HG_CHECK(gemm_lt(g), "fp8_linear: cuBLASLt has no fp8 algorithm for M=", g.m, " N=", g.n, " K=", g.k, " (", a.dtype(),
           " x ", b.dtype(), " -> ", out.dtype(), bias.defined() ? ", bias" : "",
           "); operands must be 16-byte aligned");
}

}  // namespace hg::cuda
