// The CUDA elementwise engine: one generic kernel that applies a functor to
// every element of N strided operands, plus its host-side launcher. Every
// elementwise family (unary, binary, where, cast/copy, fill, random) is a
// functor handed to launch_map, so the indexing lives in one place.
//
// map_kernel<Out, Op, In...>
//   formula     out[i] = op(in_0[i], ..., in_k[i]) for i in [0, n)
//   split       grid-stride loop; each thread handles kVec consecutive
//               elements per step in the contiguous case, 1 otherwise
//   launch      256 threads/block, blocks = min(ceil(n / (256 * kVec)), 32 * SMs)
//   bytes       per element: sizeof(Out) written + sum(sizeof(In)) read
//   precision   whatever the functor does (see each family); no accumulation
//   contiguous  when every operand is contiguous and 16-byte aligned, loads
//               and stores go through 128-bit vectors (8 halves, 4 floats)
//   strided     OffsetCalc turns the linear index into per-operand offsets
//               with one div/mod per (collapsed) dim; broadcast dims have
//               stride 0
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "core/tensor.h"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kMapThreads = 256;

// Per-operand element offsets of a linear index over a shared shape.
template <int N>
struct OffsetCalc {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};       // innermost dim last
  int64_t strides[N][kMaxDims] = {};  // elements

  __host__ __device__ void offsets(int64_t linear, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k) out[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) out[k] += idx * strides[k][d];
    }
  }
};

template <int N>
struct MapArgs {
  void* data[N];  // data[0] is the output
  OffsetCalc<N> calc;
  int64_t n;
};

// Loads/stores kVec elements at once through one aligned vector.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) VecOf {
  T v[kVec];
};

template <typename Out, typename... In>
constexpr int vec_width() {
  constexpr size_t widest = std::max({sizeof(Out), sizeof(In)...});
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

template <typename Out, typename Op, typename... In, size_t... K>
__device__ __forceinline__ void map_one(const MapArgs<1 + sizeof...(In)>& args, const Op& op,
                                        int64_t i, std::index_sequence<K...>) {
  int64_t off[1 + sizeof...(In)];
  args.calc.offsets(i, off);
  static_cast<Out*>(args.data[0])[off[0]] =
      op(static_cast<const In*>(args.data[K + 1])[off[K + 1]]...);
}

// Contiguous operands: element i of every operand is at offset i.
template <typename Out, typename Op, typename... In, size_t... K>
__device__ __forceinline__ void map_linear_one(const MapArgs<1 + sizeof...(In)>& args, const Op& op,
                                               int64_t i, std::index_sequence<K...>) {
  static_cast<Out*>(args.data[0])[i] = op(static_cast<const In*>(args.data[K + 1])[i]...);
}

template <typename Out, typename Op, typename... In>
__global__ void map_kernel(MapArgs<1 + sizeof...(In)> args, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < args.n;
       i += stride) {
    map_one<Out, Op, In...>(args, op, i, std::index_sequence_for<In...>{});
  }
}

template <typename Out, typename Op, typename... In, size_t... K>
__device__ __forceinline__ void map_vec_one(const MapArgs<1 + sizeof...(In)>& args, const Op& op,
                                            int64_t chunk, std::index_sequence<K...>) {
  constexpr int kVec = vec_width<Out, In...>();
  // One 128-bit (or narrower) load per input, kVec results, one store.
  std::tuple<VecOf<In, kVec>...> loaded{
      static_cast<const VecOf<In, kVec>*>(args.data[K + 1])[chunk]...};
  VecOf<Out, kVec> result;
#pragma unroll
  for (int j = 0; j < kVec; ++j) result.v[j] = op(std::get<K>(loaded).v[j]...);
  static_cast<VecOf<Out, kVec>*>(args.data[0])[chunk] = result;
}

// Contiguous operands: vector chunks, then a scalar tail.
template <typename Out, typename Op, typename... In>
__global__ void map_contiguous_kernel(MapArgs<1 + sizeof...(In)> args, Op op) {
  constexpr int kVec = vec_width<Out, In...>();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunks = args.n / kVec;
  for (int64_t c = first; c < chunks; c += stride) {
    map_vec_one<Out, Op, In...>(args, op, c, std::index_sequence_for<In...>{});
  }
  for (int64_t i = chunks * kVec + first; i < args.n; i += stride) {
    map_linear_one<Out, Op, In...>(args, op, i, std::index_sequence_for<In...>{});
  }
}

// Host side: builds the offset calculator (dims merged where every operand is
// contiguous across them, size-1 dims dropped) and launches on the current
// stream of out's device.
template <int N>
OffsetCalc<N> make_offset_calc(const std::array<const Tensor*, N>& ops) {
  const Tensor& out = *ops[0];
  OffsetCalc<N> calc;
  // Collect dims innermost-first, merging into the previous one when possible.
  int64_t sizes[64];
  int64_t strides[N][64];
  int rank = 0;
  for (int64_t d = out.dim() - 1; d >= 0; --d) {
    const int64_t size = out.sizes()[d];
    if (size == 1) continue;
    bool mergeable = rank > 0;
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = ops[k]->strides()[d] == strides[k][rank - 1] * sizes[rank - 1];
    }
    if (mergeable) {
      sizes[rank - 1] *= size;
      continue;
    }
    sizes[rank] = size;
    for (int k = 0; k < N; ++k) strides[k][rank] = ops[k]->strides()[d];
    ++rank;
  }
  HG_CHECK(rank <= kMaxDims, "CUDA elementwise kernels handle at most ", kMaxDims,
           " non-mergeable dims, got ", rank, " for shape ", out.shape_str(),
           "; call contiguous() on the inputs first");
  calc.rank = rank;
  for (int d = 0; d < rank; ++d) {  // store outermost first
    calc.sizes[d] = sizes[rank - 1 - d];
    for (int k = 0; k < N; ++k) calc.strides[k][d] = strides[k][rank - 1 - d];
  }
  return calc;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline int map_grid(int64_t work_items) {
  const int64_t max_blocks = 32LL * device_properties().multiProcessorCount;
  const int64_t blocks = (work_items + kMapThreads - 1) / kMapThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, max_blocks)));
}

// out = op(ins...) elementwise; all tensors on one CUDA device with out's sizes.
template <typename Out, typename... In, typename Op, typename... Tensors>
void launch_map(const char* name, const Op& op, const Tensor& out, const Tensors&... ins) {
  constexpr int N = 1 + sizeof...(In);
  static_assert(sizeof...(In) == sizeof...(Tensors), "one C++ type per input tensor");
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  MapArgs<N> args{};
  args.data[0] = out.data_ptr();
  {
    int k = 1;
    ((args.data[k++] = const_cast<void*>(static_cast<const void*>(ins.data_ptr()))), ...);
  }
  args.n = n;
  const cudaStream_t stream = current_stream().handle();
  bool contiguous = out.is_contiguous() && (... && ins.is_contiguous());
  for (int k = 0; k < N && contiguous; ++k) contiguous = aligned16(args.data[k]);
  if (contiguous) {
    constexpr int kVec = vec_width<Out, In...>();
    launch_kernel(name, __FILE__, __LINE__, map_contiguous_kernel<Out, Op, In...>,
                  dim3(map_grid((n + kVec - 1) / kVec)), dim3(kMapThreads), 0, stream, args, op);
    return;
  }
  args.calc = make_offset_calc<N>({&out, &ins...});
  launch_kernel(name, __FILE__, __LINE__, map_kernel<Out, Op, In...>, dim3(map_grid(n)),
                dim3(kMapThreads), 0,
                stream, args, op);
}

}  // namespace hg::cuda
