// CUDA GradScaler kernels (Note [GradScaler kernels] in kernels/amp_scale/amp_scale.h):
// one launch per unscale_ / check and one per update, no host sync. The CPU
// reference is kernels/amp_scale/amp_scale_cpu.cpp.
//
// amp_unscale_kernel
//   formula    per element g of every gradient: bad |= !finite(g); unless
//              check-only, g = round_G(g * inv_scale) and bad |= !finite(g');
//              a thread that saw a bad element stores found_inf = found_any =
//              1 and stamps[param] = iteration + 1 (every writer stores the
//              same value, so the unordered stores need no atomics)
//   split      multi-tensor apply: every gradient cut into chunks of
//              kAmpChunk elements, all dtypes in one table (the block
//              switches on its chunk's dtype, uniform across the block);
//              one block per chunk, thread t handles t, t + 256, ...
//   launch     256 threads per block, grid.x = number of chunks
//   bytes      per element sizeof(G) read and (unless check-only) written;
//              16 bytes of flags at most per thread; the table (40 bytes per
//              chunk) read once per block
//   precision  the product in fp32 (f64 for f64 gradients), rounded once;
//              the check reads the stored value before the multiply
//
// amp_update_scale_kernel
//   formula    amp_update_state (kernels/amp_scale/amp_scale.h): back off / grow the
//              scale, move the tracker and counters, inv_scale = 1/(double)S
//              rounded to f32, found_any = 0
//   launch     1 block of 1 thread
//   bytes      ~100 bytes of state read and written
//   precision  the scale in f32 as PyTorch; inv_scale from f64
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/amp_scale/amp_scale.h"
#include "kernels/cuda/device_math.cuh"
#include "runtime/cuda/device_table.h"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kAmpChunk = 8192;

struct AmpChunk {
  void* data;     // the gradient's element 0
  int64_t begin;  // first element of this chunk
  int64_t n;      // elements in this chunk
  int64_t param;  // stamps slot
  DType dtype;
};

template <typename G>
__device__ bool unscale_chunk(const AmpChunk& c, const float* inv_scale) {
  using A = acc_t<G>;
  G* g = static_cast<G*>(c.data) + c.begin;  // global
  bool bad = false;
  if (inv_scale == nullptr) {
    for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) bad = bad || !amp_finite(static_cast<A>(g[k]));
    return bad;
  }
  const A inv = static_cast<A>(*inv_scale);
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    const A v = static_cast<A>(g[k]);  // checked before the multiply
    const G out = convert_value<G>(v * inv);
    bad = bad || !amp_finite(v) || !amp_finite(static_cast<A>(out));
    g[k] = out;
  }
  return bad;
}

__global__ void amp_unscale_kernel(const AmpChunk* chunks, AmpUnscaleArgs args) {
  const AmpChunk c = chunks[blockIdx.x];
  bool bad = false;
  switch (c.dtype) {  // the same branch for the whole block
    case DType::F32: bad = unscale_chunk<float>(c, args.inv_scale); break;
    case DType::F16: bad = unscale_chunk<hg::half>(c, args.inv_scale); break;
    case DType::BF16: bad = unscale_chunk<hg::bfloat16>(c, args.inv_scale); break;
    case DType::F64: bad = unscale_chunk<double>(c, args.inv_scale); break;
    default: break;  // rejected by the ops layer
  }
  if (bad) {
    *args.found_inf = 1.0f;
    *args.found_any = 1.0f;
    args.stamps[c.param] = args.state[kAmpIteration] + 1;
  }
}

__global__ void amp_update_scale_kernel(float* scale, float* inv_scale, int64_t* state, float* found_any,
                                        AmpScaleOptions options) {
  amp_update_state(scale, inv_scale, state, found_any, options);
}

}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const std::vector<int64_t>& param_index,
                  const AmpUnscaleArgs& args) {
  std::vector<AmpChunk> table;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    for (int64_t begin = 0; begin < g.numel(); begin += kAmpChunk) {
      table.push_back({g.data_ptr(), begin, std::min(kAmpChunk, g.numel() - begin), param_index[i], g.dtype()});
    }
  }
  if (table.empty()) return;
  const Device device = grads[0].device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream().handle();
  const Tensor on_device = upload_table(table, device);  // the stream orders its use
  HG_LAUNCH(amp_unscale_kernel, dim3(static_cast<unsigned>(table.size())), dim3(kThreads), 0, stream,
            static_cast<const AmpChunk*>(on_device.data_ptr()), args);
}

void amp_update_scale_(const Tensor& scale, const Tensor& inv_scale, const Tensor& state, const Tensor& found_any,
                       const AmpScaleOptions& options) {
  DeviceGuard guard(state.device().index);
  HG_LAUNCH(amp_update_scale_kernel, dim3(1), dim3(1), 0, current_stream().handle(),
            static_cast<float*>(scale.data_ptr()), static_cast<float*>(inv_scale.data_ptr()),
            static_cast<int64_t*>(state.data_ptr()), static_cast<float*>(found_any.data_ptr()), options);
}

}  // namespace hg::cuda
