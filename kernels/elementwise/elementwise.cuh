// The CUDA elementwise engine: the kernels that apply a functor to every
// element of N strided operands (out first), plus the host-side launcher that
// picks one by layout. Every elementwise family (unary, binary, where,
// cast/copy, fill, random) is a functor handed to launch_map, so indexing, the
// strided copy and broadcasting live in one place.
//
// Formula (every path): out[i] = op(in_0[i], ..., in_k[i]) for i in [0, n),
// each operand addressed through its own strides (0 on broadcast dims).
// Precision: whatever the functor does (see each family); no accumulation.
// Bytes: per element sizeof(Out) written + sum(sizeof(In)) read (a broadcast
// input is read from cache after the first touch). FLOPs: the functor's.
//
// Host side, the operands' dims are collapsed first (size-1 dims dropped, a dim
// merged into the next-inner one where every operand is contiguous across
// both), then the first path that applies runs (MapPath, kernels/elementwise/map_stats.h):
//
// map_contiguous_kernel   every operand contiguous and 16-byte aligned
//   split   grid-stride over 128-bit chunks (kVec = 16 / widest element:
//           8 halves, 4 floats), then a scalar tail
//   launch  256 threads/block, blocks = min(ceil(n / (256 kVec)), 32 SMs)
//
// map_vector_runs_kernel  strided, but the innermost collapsed dim is
//           contiguous in the output and contiguous (stride 1) or broadcast
//           (stride 0) in each input, its size and every outer stride a
//           multiple of kVec, the bases 16-byte aligned (the bias
//           broadcast [M, N] <- [N], a slice of rows, a merged head layout)
//   split   kVec-element chunks; a chunk's offsets from 32-bit fast-divisor
//           index math (IntDivider, kernels/elementwise/int_divider.h), then one
//           128-bit load per stride-1 input (a splat for stride 0), one store;
//           kElemsPerThread chunks per thread per step
//   launch  256 threads/block, blocks = min(ceil(chunks / (256 * 4)), 32 SMs)
//
// map_transpose_kernel    one input whose two innermost collapsed dims are
//           swapped against the output (out [.., R, C] contiguous in C, in
//           contiguous in R): x.transpose(-1, -2).contiguous(), the
//           [B, T, H, D] <-> [B, H, T, D] head layouts, a transposed cast
//   split   32 x 32 tiles through shared memory (padded to 33 columns: no bank
//           conflicts): the tile is read along the input's contiguous dim and
//           written along the output's, so both sides coalesce; batch dims
//           (collapsed dims past the two) by fast-divisor offsets
//   launch  32 x 8 threads (4 elements each), grid (ceil(C / 32), ceil(R / 32),
//           min(batches, 65535)), looping over the rest of the batches
//
// map_strided32_kernel    any other layout whose sizes and offsets fit in
//           2^31 - 1
//   split   kElemsPerThread = 4 elements per thread per step (indices
//           blockDim apart, so warps stay coalesced), all loads before the
//           stores; offsets by 32-bit fast-divisor div/mod per collapsed dim
//   launch  256 threads/block, blocks = min(ceil(n / (256 * 4)), 32 SMs)
//
// map_kernel              the 64-bit fallback: more than 2^31 - 1 elements, or
//           an operand offset past it; one element per thread per step, a
//           64-bit div/mod per collapsed dim
//   launch  256 threads/block, blocks = min(ceil(n / 256), 32 SMs)
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "core/tensor.h"
#include "kernels/elementwise/int_divider.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/elementwise/map_stats.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kMapThreads = 256;
inline constexpr int kElemsPerThread = 4;
inline constexpr int kTile = 32;     // transpose tile edge
inline constexpr int kTileRows = 8;  // threads per tile column: 32 x 8 threads, 4 elements each
inline constexpr int64_t kMaxGridYZ = 65535;

// ---- host-side layout: collapsed dims -----------------------------------------------------

// The operands' dims after collapsing, innermost first.
template <int N>
struct Collapsed {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // elements
};

// Collapses the dims of ops (ops[0] the output, whose sizes every operand
// shares): size-1 dims dropped, a dim merged into the next-inner one where
// every operand is contiguous across both. More than kMaxDims dims left is an
// error.
template <int N>
Collapsed<N> collapse_dims(const std::array<const Tensor*, N>& ops) {
  const Tensor& out = *ops[0];
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
  HG_CHECK(rank <= kMaxDims, "CUDA elementwise kernels handle at most ", kMaxDims, " non-mergeable dims, got ", rank,
           " for shape ", out.shape_str(), "; call contiguous() on the inputs first");
  Collapsed<N> c;
  c.rank = rank;
  for (int d = 0; d < rank; ++d) {
    c.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) c.strides[k][d] = strides[k][d];
  }
  return c;
}

// Whether every size and every operand offset fits in 2^31 - 1 (strides >= 0),
// so the 32-bit fast-divisor index math is exact.
template <int N>
bool fits_index32(const Collapsed<N>& c, int64_t n) {
  if (n > INT32_MAX) return false;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;  // the largest offset operand k reaches
    for (int d = 0; d < c.rank; ++d) {
      if (c.strides[k][d] < 0 || c.strides[k][d] > INT32_MAX) return false;
      last += (c.sizes[d] - 1) * c.strides[k][d];
      if (last > INT32_MAX) return false;
    }
  }
  return true;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the innermost collapsed dim runs contiguously in kVec chunks (see
// map_vector_runs_kernel above).
template <int N>
bool vector_runs_apply(const Collapsed<N>& c, const std::array<const Tensor*, N>& ops, int vec) {
  if (vec <= 1 || c.rank < 1 || c.sizes[0] % vec != 0 || c.strides[0][0] != 1) return false;
  for (int k = 0; k < N; ++k) {
    const int64_t s0 = c.strides[k][0];
    if (s0 != 1 && !(k > 0 && s0 == 0)) return false;
    if (s0 == 1 && !aligned16(ops[k]->data_ptr())) return false;
    for (int d = 1; d < c.rank; ++d) {
      if (s0 == 1 && c.strides[k][d] % vec != 0) return false;
    }
  }
  return true;
}

// Whether the one input's two innermost collapsed dims are the output's swapped.
template <int N>
bool transpose_applies(const Collapsed<N>& c) {
  if constexpr (N != 2) {
    return false;
  } else {
    if (c.rank < 2 || c.strides[0][0] != 1 || c.strides[1][1] != 1 || c.strides[1][0] == 1 || c.strides[1][0] == 0) {
      return false;
    }
    const int64_t cols = c.sizes[0], rows = c.sizes[1];
    return cols >= kTileRows && rows >= kTileRows && (rows + kTile - 1) / kTile <= kMaxGridYZ;
  }
}

template <int N>
MapPath plan_map(const Collapsed<N>& c, const std::array<const Tensor*, N>& ops, int64_t n, int vec) {
  if (map_index64_forced() || !fits_index32<N>(c, n)) return MapPath::kStrided64;
  if (vector_runs_apply<N>(c, ops, vec)) return MapPath::kVectorRuns;
  if (transpose_applies<N>(c)) return MapPath::kTranspose;
  return MapPath::kStrided32;
}

// Host side: records a launch in the counters (kernels/elementwise/map_stats.h).
void count_map_launch(MapPath path, int64_t elements, int64_t bytes);

// ---- device-side offsets -----------------------------------------------------------------

// Per-operand element offsets of a linear index, 64-bit (the fallback).
template <int N>
struct OffsetCalc {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};       // innermost dim first
  int64_t strides[N][kMaxDims] = {};  // elements

  __host__ __device__ void offsets(int64_t linear, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k) out[k] = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t idx = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) out[k] += idx * strides[k][d];
    }
  }
};

// The same in 32 bits with a precomputed fast divisor per dim (sizes and
// offsets < 2^31: fits_index32).
template <int N>
struct OffsetCalc32 {
  int rank = 0;
  IntDivider sizes[kMaxDims];          // innermost dim first
  uint32_t strides[N][kMaxDims] = {};  // elements

  __device__ __forceinline__ void offsets(uint32_t linear, uint32_t (&out)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == rank) break;
      const uint32_t q = sizes[d].div(linear);
      const uint32_t idx = linear - q * sizes[d].divisor;
      linear = q;
#pragma unroll
      for (int k = 0; k < N; ++k) out[k] += idx * strides[k][d];
    }
  }
};

// Dims [first, rank) of c as a 32-bit calculator, the sizes of dim `first`
// divided by `inner_div` (the vector-run path counts chunks there) and the
// strides of dim `first` multiplied by it.
template <int N>
OffsetCalc32<N> make_offset_calc32(const Collapsed<N>& c, int first = 0, int64_t inner_div = 1) {
  OffsetCalc32<N> calc;
  calc.rank = c.rank - first;
  for (int d = first; d < c.rank; ++d) {
    const bool inner = d == first;
    calc.sizes[d - first] = IntDivider(inner ? c.sizes[d] / inner_div : c.sizes[d]);
    for (int k = 0; k < N; ++k) {
      calc.strides[k][d - first] = static_cast<uint32_t>(inner ? c.strides[k][d] * inner_div : c.strides[k][d]);
    }
  }
  return calc;
}

template <int N>
OffsetCalc<N> make_offset_calc(const Collapsed<N>& c) {
  OffsetCalc<N> calc;
  calc.rank = c.rank;
  for (int d = 0; d < c.rank; ++d) {
    calc.sizes[d] = c.sizes[d];
    for (int k = 0; k < N; ++k) calc.strides[k][d] = c.strides[k][d];
  }
  return calc;
}

template <int N>
struct MapArgs {
  void* data[N];  // data[0] is the output
  OffsetCalc<N> calc;
  int64_t n;
};

template <int N>
struct MapArgs32 {
  void* data[N];
  OffsetCalc32<N> calc;
  uint32_t n;  // elements (kStrided32) or chunks (kVectorRuns)
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

// ---- kernels ------------------------------------------------------------------------------

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

// The 64-bit fallback: one element per thread per step.
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

// kElemsPerThread elements per thread per step, 32-bit offsets: all loads and
// the op first, then the stores (the stores may alias the loads, so the
// compiler could not hoist the loads itself).
template <typename Out, typename Op, typename... In, size_t... K>
__device__ __forceinline__ void map_strided32_step(const MapArgs32<1 + sizeof...(In)>& args, const Op& op,
                                                   uint32_t base, std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  Out result[kElemsPerThread];
  uint32_t out_off[kElemsPerThread];
#pragma unroll
  for (int j = 0; j < kElemsPerThread; ++j) {
    const uint32_t i = base + static_cast<uint32_t>(j) * blockDim.x + threadIdx.x;
    if (i < args.n) {
      uint32_t off[N];
      args.calc.offsets(i, off);
      out_off[j] = off[0];
      result[j] = op(static_cast<const In*>(args.data[K + 1])[off[K + 1]]...);
    }
  }
#pragma unroll
  for (int j = 0; j < kElemsPerThread; ++j) {
    const uint32_t i = base + static_cast<uint32_t>(j) * blockDim.x + threadIdx.x;
    if (i < args.n) static_cast<Out*>(args.data[0])[out_off[j]] = result[j];
  }
}

template <typename Out, typename Op, typename... In>
__global__ void map_strided32_kernel(MapArgs32<1 + sizeof...(In)> args, Op op) {
  const uint32_t step = gridDim.x * blockDim.x * kElemsPerThread;  // < 2^31: 32 SMs' blocks of 1024 elements
  for (uint32_t base = blockIdx.x * blockDim.x * kElemsPerThread; base < args.n; base += step) {
    map_strided32_step<Out, Op, In...>(args, op, base, std::index_sequence_for<In...>{});
  }
}

// One kVec chunk of a vector run: a 128-bit load per stride-1 input (its
// offset is a multiple of kVec), one element splatted for a stride-0 input.
template <typename T, int kVec>
__device__ __forceinline__ VecOf<T, kVec> load_run(const void* base, uint32_t offset, bool broadcast) {
  const T* p = static_cast<const T*>(base) + offset;
  if (broadcast) {
    VecOf<T, kVec> v;
    const T x = *p;
#pragma unroll
    for (int j = 0; j < kVec; ++j) v.v[j] = x;
    return v;
  }
  return *reinterpret_cast<const VecOf<T, kVec>*>(p);
}

template <typename Out, typename Op, typename... In, size_t... K>
__device__ __forceinline__ void map_run_chunk(const MapArgs32<1 + sizeof...(In)>& args, const Op& op, uint32_t chunk,
                                              uint32_t broadcast_mask, std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  constexpr int kVec = vec_width<Out, In...>();
  uint32_t off[N];
  args.calc.offsets(chunk, off);
  std::tuple<VecOf<In, kVec>...> loaded{
      load_run<In, kVec>(args.data[K + 1], off[K + 1], ((broadcast_mask >> (K + 1)) & 1u) != 0)...};
  VecOf<Out, kVec> result;
#pragma unroll
  for (int j = 0; j < kVec; ++j) result.v[j] = op(std::get<K>(loaded).v[j]...);
  *reinterpret_cast<VecOf<Out, kVec>*>(static_cast<Out*>(args.data[0]) + off[0]) = result;
}

// args.n counts kVec chunks; bit k of broadcast_mask: operand k has stride 0
// in the innermost dim.
template <typename Out, typename Op, typename... In>
__global__ void map_vector_runs_kernel(MapArgs32<1 + sizeof...(In)> args, Op op, uint32_t broadcast_mask) {
  const uint32_t step = gridDim.x * blockDim.x * kElemsPerThread;
  for (uint32_t base = blockIdx.x * blockDim.x * kElemsPerThread; base < args.n; base += step) {
#pragma unroll
    for (int j = 0; j < kElemsPerThread; ++j) {
      const uint32_t chunk = base + static_cast<uint32_t>(j) * blockDim.x + threadIdx.x;
      if (chunk < args.n) {
        map_run_chunk<Out, Op, In...>(args, op, chunk, broadcast_mask, std::index_sequence_for<In...>{});
      }
    }
  }
}

// The transposing layout of one input: collapsed dims 0 (C, contiguous in
// out) and 1 (R, contiguous in the input); batch offsets over dims 2.. .
struct TransposeArgs {
  void* out;
  const void* in;
  OffsetCalc32<2> batch;  // dims 2.. of the collapsed layout
  uint32_t batches;
  uint32_t rows, cols;      // R, C
  uint32_t out_row_stride;  // out's stride of dim 1 (R)
  uint32_t in_col_stride;   // in's stride of dim 0 (C)
};

template <typename Out, typename Op, typename In>
__global__ void __launch_bounds__(kTile* kTileRows) map_transpose_kernel(TransposeArgs args, Op op) {
  // Raw bytes viewed as In[kTile][kTile + 1] (no constructor runs on shared memory).
  __shared__ __align__(16) unsigned char tile_bytes[kTile * (kTile + 1) * sizeof(In)];
  auto tile = reinterpret_cast<In(*)[kTile + 1]>(tile_bytes);
  const uint32_t c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  const In* in = static_cast<const In*>(args.in);
  Out* out = static_cast<Out*>(args.out);
  for (uint32_t b = blockIdx.z; b < args.batches; b += gridDim.z) {
    uint32_t off[2];
    args.batch.offsets(b, off);
    // Read along the input's contiguous dim (r), tile[c][r].
#pragma unroll
    for (int j = 0; j < kTile; j += kTileRows) {
      const uint32_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
      if (c < args.cols && r < args.rows) tile[threadIdx.y + j][threadIdx.x] = in[off[1] + r + c * args.in_col_stride];
    }
    __syncthreads();
    // Write along the output's contiguous dim (c).
#pragma unroll
    for (int j = 0; j < kTile; j += kTileRows) {
      const uint32_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
      if (c < args.cols && r < args.rows)
        out[off[0] + c + r * args.out_row_stride] = op(tile[threadIdx.x][threadIdx.y + j]);
    }
    __syncthreads();  // the tile is reused by the next batch
  }
}

// ---- host side ----------------------------------------------------------------------------

inline int map_grid(int64_t work_items) {
  const int64_t max_blocks = 32LL * device_properties().multiProcessorCount;
  const int64_t blocks = (work_items + kMapThreads - 1) / kMapThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, max_blocks)));
}

// out = op(ins...) elementwise; all tensors on one CUDA device with out's sizes.
template <typename Out, typename... In, typename Op, typename... Tensors>
void launch_map(const char* name, const Op& op, const Tensor& out, const Tensors&... ins) {
  constexpr int N = 1 + sizeof...(In);
  constexpr int kVec = vec_width<Out, In...>();
  static_assert(sizeof...(In) == sizeof...(Tensors), "one C++ type per input tensor");
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  void* data[N] = {out.data_ptr(), const_cast<void*>(static_cast<const void*>(ins.data_ptr()))...};
  const int64_t bytes = n * static_cast<int64_t>(sizeof(Out) + (0 + ... + sizeof(In)));
  const cudaStream_t stream = current_stream().handle();
  bool contiguous = out.is_contiguous() && (... && ins.is_contiguous());
  for (int k = 0; k < N && contiguous; ++k) contiguous = aligned16(data[k]);
  if (contiguous) {
    MapArgs<N> args{};
    std::copy(data, data + N, args.data);
    args.n = n;
    count_map_launch(MapPath::kContiguous, n, bytes);
    launch_kernel(name, __FILE__, __LINE__, map_contiguous_kernel<Out, Op, In...>,
                  dim3(map_grid((n + kVec - 1) / kVec)), dim3(kMapThreads), 0, stream, args, op);
    return;
  }
  const std::array<const Tensor*, N> ops{&out, &ins...};
  const Collapsed<N> c = collapse_dims<N>(ops);
  const MapPath path = plan_map<N>(c, ops, n, kVec);
  count_map_launch(path, n, bytes);
  switch (path) {
    case MapPath::kVectorRuns: {
      MapArgs32<N> args{};
      std::copy(data, data + N, args.data);
      args.calc = make_offset_calc32<N>(c, 0, kVec);
      args.n = static_cast<uint32_t>(n / kVec);
      // Bit k set: input k (k >= 1) is broadcast along the innermost dim.
      uint32_t broadcast_mask = 0, bit = 2u;
      for (int k = 1; k < N; ++k, bit <<= 1) {
        if (c.strides[k][0] == 0) broadcast_mask |= bit;
      }
      launch_kernel(name, __FILE__, __LINE__, map_vector_runs_kernel<Out, Op, In...>,
                    dim3(map_grid((n / kVec + kElemsPerThread - 1) / kElemsPerThread)), dim3(kMapThreads), 0, stream,
                    args, op, broadcast_mask);
      return;
    }
    case MapPath::kTranspose: {
      if constexpr (N == 2) {
        TransposeArgs args{};
        args.out = data[0];
        args.in = data[1];
        args.batch = make_offset_calc32<N>(c, 2);
        int64_t batches = 1;
        for (int d = 2; d < c.rank; ++d) batches *= c.sizes[d];
        args.batches = static_cast<uint32_t>(batches);
        args.cols = static_cast<uint32_t>(c.sizes[0]);
        args.rows = static_cast<uint32_t>(c.sizes[1]);
        args.out_row_stride = static_cast<uint32_t>(c.strides[0][1]);
        args.in_col_stride = static_cast<uint32_t>(c.strides[1][0]);
        const dim3 grid(static_cast<unsigned>((c.sizes[0] + kTile - 1) / kTile),
                        static_cast<unsigned>((c.sizes[1] + kTile - 1) / kTile),
                        static_cast<unsigned>(std::min(batches, kMaxGridYZ)));
        launch_kernel(name, __FILE__, __LINE__, map_transpose_kernel<Out, Op, In...>, grid, dim3(kTile, kTileRows), 0,
                      stream, args, op);
      }
      return;
    }
    case MapPath::kStrided32: {
      MapArgs32<N> args{};
      std::copy(data, data + N, args.data);
      args.calc = make_offset_calc32<N>(c);
      args.n = static_cast<uint32_t>(n);
      launch_kernel(name, __FILE__, __LINE__, map_strided32_kernel<Out, Op, In...>,
                    dim3(map_grid((n + kElemsPerThread - 1) / kElemsPerThread)), dim3(kMapThreads), 0, stream, args,
                    op);
      return;
    }
    default: {
      MapArgs<N> args{};
      std::copy(data, data + N, args.data);
      args.calc = make_offset_calc<N>(c);
      args.n = n;
      launch_kernel(name, __FILE__, __LINE__, map_kernel<Out, Op, In...>, dim3(map_grid(n)), dim3(kMapThreads), 0,
                    stream, args, op);
      return;
    }
  }
}

// The element-wise engine's loop on CUDA (kernels/elementwise/elementwise_engine.h):
// every functor of the op list runs through launch_map.
struct CudaLoop {
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char* name, const Fn& fn, const Tensor& out, const Tensors&... ins) {
    launch_map<Out, In...>(name, fn, out, ins...);
  }
};

}  // namespace hg::cuda
