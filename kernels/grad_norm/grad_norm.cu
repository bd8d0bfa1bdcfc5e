// CUDA global gradient norm and in-place rescale (Note [Global gradient norm]
// in kernels/grad_norm/grad_norm.h): three launches per clip_grad_norm_, no host sync.
// The CPU reference is kernels/grad_norm/grad_norm_cpu.cpp.
//
// All kernels walk one chunk table: every gradient is cut into chunks of
// kGradNormChunk elements (the last one shorter), one GradChunk entry each,
// mixed dtypes in one table (the block switches on its chunk's dtype, which
// is uniform across the block, so no divergence). The table is copied to the
// device as bytes; the stream orders its use.
//
// grad_norm_partials_kernel
//   formula    partial[c] = combine_{k in chunk c} |g[k]|^p   (max |g[k]| for p = inf)
//   shapes     chunks [num_chunks] -> partials [num_chunks] f64
//   split      one block per chunk; thread t accumulates elements t, t + 256,
//              ... of its chunk in a register (acc_t), then the block combines
//              the 256 values in f64 by block_allreduce (warp xor butterfly,
//              then the 8 warp results in warp order through shared memory)
//   launch     kBlockThreads (256) threads per block, grid.x = num_chunks
//   bytes      each gradient element read once (sizeof(G)); 8 bytes written
//              per chunk
//   precision  fp32 per thread for f32/f16/bf16 (f64 for f64), f64 across
//              threads; a fixed order (no atomics), so bit-deterministic
//
// grad_norm_finish_kernel
//   formula    total = combine_c partial[c]; norm = total^(1/p) rounded to
//              f32; coef = min(1, max_norm / (norm + 1e-6))
//   split      one block: thread t combines partials t, t + 256, ... in f64,
//              then block_allreduce as above; thread 0 writes both results
//   launch     1 block of kBlockThreads (256) threads
//   bytes      8 per partial read, 2 x 4 written
//   precision  f64 throughout, one rounding of the norm to f32; coef in f32
//              from the f32 norm (as PyTorch)
//
// scale_grads_kernel
//   formula    g[k] = round_G(g[k] * coef), coef = *factor (device memory)
//   split      one block per chunk, thread t handles t, t + 256, ...
//   launch     kBlockThreads (256) threads per block, grid.x = num_chunks
//   bytes      sizeof(G) read + written per element; nothing when coef == 1
//              (every block returns before touching its chunk)
//   precision  the product in acc_t (fp32, f64 for f64), rounded once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/cuda/block_reduce.cuh"
#include "runtime/cuda/device_limits.h"
#include "kernels/cuda/device_math.cuh"
#include "runtime/cuda/device_table.h"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/grad_norm/grad_norm.h"

namespace hg::cuda {

namespace {

struct GradChunk {
  void* data;     // the gradient's element 0 (global memory)
  int64_t begin;  // first element of this chunk
  int64_t n;      // elements in this chunk (1..kGradNormChunk)
  DType dtype;    // the gradient's dtype
};

__device__ __forceinline__ float abs_of(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs_of(double x) { return ::fabs(x); }

// This thread's share of one chunk, in acc_t<G> (registers only).
template <typename G>
__device__ double thread_partial(const GradChunk& c, GradNormKind kind, double p) {
  using A = acc_t<G>;
  const G* g = static_cast<const G*>(c.data) + c.begin;  // global
  const A p_acc = static_cast<A>(p);
  A total = 0;
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    const A a = abs_of(static_cast<A>(g[k]));
    total = kind == GradNormKind::kInf ? grad_norm_combine(kind, total, a)
                                       : total + grad_norm_term(kind, p_acc, a);
  }
  return static_cast<double>(total);
}

__global__ void grad_norm_partials_kernel(const GradChunk* chunks, GradNormKind kind, double p,
                                          double* partials) {
  __shared__ double warp_partials[kBlockThreads / kWarpSize];  // shared: one per warp
  const GradChunk c = chunks[blockIdx.x];
  double value = 0.0;
  switch (c.dtype) {  // the same branch for the whole block
    case DType::F32: value = thread_partial<float>(c, kind, p); break;
    case DType::F16: value = thread_partial<hg::half>(c, kind, p); break;
    case DType::BF16: value = thread_partial<hg::bfloat16>(c, kind, p); break;
    case DType::F64: value = thread_partial<double>(c, kind, p); break;
    default: break;  // rejected by the ops layer
  }
  value = block_allreduce(value, [kind](double a, double b) { return grad_norm_combine(kind, a, b); },
                          warp_partials);
  if (threadIdx.x == 0) partials[blockIdx.x] = value;
}

__global__ void grad_norm_finish_kernel(const double* partials, int64_t count, GradNormKind kind, double p,
                                        float max_norm, float* total_norm, float* clip_coef) {
  __shared__ double warp_partials[kBlockThreads / kWarpSize];  // shared: one per warp
  double value = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) value = grad_norm_combine(kind, value, partials[i]);
  value = block_allreduce(value, [kind](double a, double b) { return grad_norm_combine(kind, a, b); },
                          warp_partials);
  if (threadIdx.x == 0) {
    const float norm = static_cast<float>(grad_norm_finish(kind, p, value));
    *total_norm = norm;
    *clip_coef = clip_coefficient(max_norm, norm);
  }
}

template <typename G>
__device__ void scale_chunk(const GradChunk& c, float coef) {
  using A = acc_t<G>;
  G* g = static_cast<G*>(c.data) + c.begin;  // global
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    g[k] = convert_value<G>(static_cast<A>(g[k]) * static_cast<A>(coef));
  }
}

__global__ void scale_grads_kernel(const GradChunk* chunks, const float* factor) {
  const float coef = *factor;
  if (coef == 1.0f) return;  // x * 1 == x: skip the memory traffic
  const GradChunk c = chunks[blockIdx.x];
  switch (c.dtype) {
    case DType::F32: scale_chunk<float>(c, coef); break;
    case DType::F16: scale_chunk<hg::half>(c, coef); break;
    case DType::BF16: scale_chunk<hg::bfloat16>(c, coef); break;
    case DType::F64: scale_chunk<double>(c, coef); break;
    default: break;  // rejected by the ops layer
  }
}

// The chunk table on `device` (bytes kept alive by the returned tensor).
struct DeviceTable {
  Tensor bytes;
  const GradChunk* chunks = nullptr;
  int64_t count = 0;
};

DeviceTable upload_chunk_table(const std::vector<Tensor>& grads, Device device) {
  std::vector<GradChunk> table;
  for (const Tensor& g : grads) {
    for (int64_t begin = 0; begin < g.numel(); begin += kGradNormChunk) {
      table.push_back({g.data_ptr(), begin, std::min(kGradNormChunk, g.numel() - begin), g.dtype()});
    }
  }
  DeviceTable out;
  out.count = static_cast<int64_t>(table.size());
  if (table.empty()) return out;
  out.bytes = upload_table(table, device);
  out.chunks = static_cast<const GradChunk*>(out.bytes.data_ptr());
  return out;
}

}  // namespace

void grad_norm(const std::vector<Tensor>& grads, GradNormKind kind, double p, float max_norm,
               const Tensor& total_norm, const Tensor& clip_coef) {
  const Device device = total_norm.device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream().handle();
  const DeviceTable table = upload_chunk_table(grads, device);
  // One f64 partial per chunk; every entry is written by pass 1.
  const Tensor partials = empty({std::max<int64_t>(table.count, 1)}, {.dtype = kF64, .device = device});
  auto* partials_ptr = static_cast<double*>(partials.data_ptr());
  HG_LAUNCH(grad_norm_partials_kernel, dim3(static_cast<unsigned>(table.count)), dim3(kBlockThreads), 0, stream,
            table.chunks, kind, p, partials_ptr);
  HG_LAUNCH(grad_norm_finish_kernel, dim3(1), dim3(kBlockThreads), 0, stream,
            static_cast<const double*>(partials_ptr), table.count, kind, p, max_norm,
            static_cast<float*>(total_norm.data_ptr()), static_cast<float*>(clip_coef.data_ptr()));
}

void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor) {
  const Device device = factor.device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream().handle();
  const DeviceTable table = upload_chunk_table(grads, device);
  HG_LAUNCH(scale_grads_kernel, dim3(static_cast<unsigned>(table.count)), dim3(kBlockThreads), 0, stream,
            table.chunks, static_cast<const float*>(factor.data_ptr()));
}

}  // namespace hg::cuda
