// CUDA gathers and scatters (kernels/index/index.h): index_select (and embedding),
// the deterministic index_add (the embedding and index_select backward),
// gather, scatter_add, tril/triu and arange, each kernel headed by its
// formula, split, launch shape, bytes moved and precision, then the
// launchers. CPU reference: kernels/index/index_cpu.cpp.
//
// Note [Deterministic index_add]
// out[o, index[k], i] += src[o, k, i] with repeated indices is a reduction
// into data-dependent places. Float atomics would make the sum order (and so
// the bits) depend on scheduling, as PyTorch's embedding backward does with
// atomicAdd. Instead:
//   1. index_keys_kernel turns each index into a key (an out-of-range index
//      is reported and, like a skipped padding index, gets the key n, which
//      sorts last and is ignored) and pairs it with its position k;
//   2. a stable LSD radix sort on the keys, 8 bits per pass (histogram per
//      256-element tile, one exclusive scan of the digit-major histogram,
//      scatter with the element's rank among equal digits of its tile), so
//      positions with equal keys stay in increasing k;
//   3. index_add_runs_kernel: one block per run of equal keys sums src over
//      the run's positions in sorted order in acc_t and adds the sum to out.
// The order of every sum is a function of the indices alone, and the CPU
// reference sums in the same order, so CPU and CUDA agree and every run
// gives the same bits. Cost: 2 + 2 x passes small kernels over the K indices
// (passes = bytes needed for n, 2 for a 50,257-row vocabulary) and one read of
// src; a run is one block, so a very frequent index is one block's serial work
// (the load imbalance llm.c's bucketed encoder backward also accepts).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/cuda/device_error.h"
#include "runtime/cuda/device_limits.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/index/index.h"

namespace hg::cuda {

namespace {

inline constexpr int kIndexThreads = 256;
inline constexpr int kRadixBits = 8;
inline constexpr int kRadixBins = 1 << kRadixBits;  // 256
inline constexpr int kRadixTile = 256;              // one element per thread
inline constexpr int kScanThreads = 1024;
inline constexpr int64_t kMaxRunBlocks = 1 << 16;

// index_select_kernel<T>
//   formula    out[o, k, i] = x[o, index[k], i]
//   shapes     x [outer, n, inner], out [outer, K, inner], index [K] i64
//   split      one thread per output element, grid-stride (consecutive threads
//              take consecutive i: coalesced rows)
//   launch     256 threads, blocks = min(ceil(outer K inner / 256), 32 x SMs)
//   bytes      per element 1 read + 1 write of T; index reads hit the cache
//   precision  a copy; an out-of-range index is reported and writes 0
template <typename T>
__global__ void index_select_kernel(T* __restrict__ out, const T* __restrict__ x, const int64_t* __restrict__ index,
                                    int64_t outer, int64_t n, int64_t k_count, int64_t inner, DeviceError* error,
                                    int op) {
  const int64_t total = outer * k_count * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e % inner;
    const int64_t ok = e / inner;
    const int64_t k = ok % k_count, o = ok / k_count;
    const int64_t j = index[k];
    if (j < 0 || j >= n) {
      report_device_error(error, DeviceErrorCode::kIndexOutOfRange, static_cast<OpId>(op), j, k, n);
      out[e] = T(0);
      continue;
    }
    out[e] = x[(o * n + j) * inner + i];
  }
}

// index_keys_kernel  (Note [Deterministic index_add], step 1)
//   formula    key[k] = index[k] (n when out of range or == skip), val[k] = k
//   split      one thread per index, grid-stride; 256 threads
//   bytes      8 B read, 8 B written per index
__global__ void index_keys_kernel(const int64_t* __restrict__ index, int32_t* __restrict__ keys,
                                  int32_t* __restrict__ vals, int64_t k_count, int64_t n, int64_t skip,
                                  DeviceError* error, int op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < k_count; k += stride) {
    const int64_t j = index[k];
    const bool valid = j >= 0 && j < n;
    if (!valid) report_device_error(error, DeviceErrorCode::kIndexOutOfRange, static_cast<OpId>(op), j, k, n);
    keys[k] = static_cast<int32_t>(valid && j != skip ? j : n);
    vals[k] = static_cast<int32_t>(k);
  }
}

// radix_histogram_kernel  (step 2a, one pass)
//   formula    hist[d * tiles + t] = #{k in tile t : digit(key[k]) == d}
//   split      one 256-element tile per block, one element per thread; counts
//              in shared memory with integer atomics (exact, so deterministic)
//   launch     256 threads, `tiles` blocks
//   bytes      4 B read per key, 256 x 4 B written per tile
__global__ void radix_histogram_kernel(const int32_t* __restrict__ keys, int64_t k_count, int shift,
                                       int32_t* __restrict__ hist, int64_t tiles) {
  __shared__ int32_t counts[kRadixBins];  // shared: this tile's digit counts
  const int t = static_cast<int>(threadIdx.x);
  counts[t] = 0;
  __syncthreads();
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kRadixTile + t;
  if (k < k_count) atomicAdd(&counts[(keys[k] >> shift) & (kRadixBins - 1)], 1);
  __syncthreads();
  hist[static_cast<int64_t>(t) * tiles + blockIdx.x] = counts[t];
}

// exclusive_scan_kernel  (step 2b)
//   formula    data[i] = sum_{j < i} data[j], in place, over 256 x tiles counts
//   split      one block walks the array in chunks of 1024: a Hillis-Steele
//              scan in shared memory per chunk plus the running carry
//   launch     1 block x 1024 threads
//   bytes      4 B read + 4 B written per count
__global__ void __launch_bounds__(kScanThreads) exclusive_scan_kernel(int32_t* __restrict__ data, int64_t n) {
  __shared__ int32_t s[kScanThreads];  // shared: the chunk being scanned
  const int t = static_cast<int>(threadIdx.x);
  int32_t carry = 0;  // the same in every thread
  for (int64_t base = 0; base < n; base += kScanThreads) {
    const int64_t i = base + t;
    const int32_t v = i < n ? data[i] : 0;
    s[t] = v;
    __syncthreads();
    for (int offset = 1; offset < kScanThreads; offset *= 2) {
      const int32_t add = t >= offset ? s[t - offset] : 0;
      __syncthreads();
      s[t] += add;
      __syncthreads();
    }
    if (i < n) data[i] = carry + s[t] - v;
    carry += s[kScanThreads - 1];
    __syncthreads();  // the next chunk overwrites s
  }
}

// radix_scatter_kernel  (step 2c)
//   formula    dest(k) = offsets[digit * tiles + tile] + #{j < k in the tile : same digit}
//              keys_out[dest] = key[k], vals_out[dest] = val[k]   (stable)
//   split      one 256-element tile per block; each thread counts the equal
//              digits before it in shared memory (256 compares)
//   launch     256 threads, `tiles` blocks
//   bytes      8 B read + 8 B written per element (scattered writes)
__global__ void radix_scatter_kernel(const int32_t* __restrict__ keys_in, const int32_t* __restrict__ vals_in,
                                     int32_t* __restrict__ keys_out, int32_t* __restrict__ vals_out, int64_t k_count,
                                     int shift, const int32_t* __restrict__ offsets, int64_t tiles) {
  __shared__ int32_t digits[kRadixTile];  // shared: the tile's digits, -1 past the end
  const int t = static_cast<int>(threadIdx.x);
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kRadixTile + t;
  const int32_t key = k < k_count ? keys_in[k] : 0;
  const int32_t digit = k < k_count ? (key >> shift) & (kRadixBins - 1) : -1;
  digits[t] = digit;
  __syncthreads();
  if (k >= k_count) return;
  int32_t rank = 0;
  for (int j = 0; j < t; ++j) rank += digits[j] == digit ? 1 : 0;
  const int64_t dest = offsets[static_cast<int64_t>(digit) * tiles + blockIdx.x] + rank;
  keys_out[dest] = key;
  vals_out[dest] = vals_in[k];
}

// index_add_runs_kernel<T>  (step 3)
//   formula    for each run p..end of equal sorted keys j < n:
//              out[o, j, i] += sum_{q in run, in order} src[o, val[q], i]
//   shapes     out [outer, n, inner], src [outer, K, inner], keys/vals [K] sorted
//   split      one block per sorted position, grid-stride; positions that do not
//              start a run exit; the block's threads stride over (o, i)
//   launch     min(256, outer x inner rounded up to 32) threads,
//              min(K, 65,536) blocks
//   bytes      per src element 1 read of T; per output touched 1 read + 1
//              write of T; keys and vals read once per position (cached)
//   precision  acc_t sum from 0 in increasing k, one rounding when added to out
template <typename T>
__global__ void index_add_runs_kernel(T* __restrict__ out, const T* __restrict__ src, const int32_t* __restrict__ keys,
                                      const int32_t* __restrict__ vals, int64_t k_count, int64_t outer, int64_t n,
                                      int64_t inner) {
  using A = acc_t<T>;
  for (int64_t p = blockIdx.x; p < k_count; p += gridDim.x) {
    const int64_t key = keys[p];
    if (key >= n) return;                       // skipped keys sort last: nothing more to do
    if (p > 0 && keys[p - 1] == key) continue;  // not the start of a run
    int64_t end = p + 1;
    while (end < k_count && keys[end] == key) ++end;
    for (int64_t e = threadIdx.x; e < outer * inner; e += blockDim.x) {
      const int64_t o = e / inner, i = e % inner;
      A acc = A(0);
      for (int64_t q = p; q < end; ++q) acc += static_cast<A>(src[(o * k_count + vals[q]) * inner + i]);
      T& slot = out[(o * n + key) * inner + i];
      slot = static_cast<T>(static_cast<A>(slot) + acc);
    }
  }
}

// gather_kernel<T>
//   formula    out[p] = x[p with p[dim] = index[p]]
//   shapes     out, index contiguous of one shape (rank <= 8); x contiguous
//   split      one thread per output element, grid-stride
//   launch     256 threads, blocks = min(ceil(numel / 256), 32 x SMs)
//   bytes      per element 8 B index + 1 read of T (gathered) + 1 write of T
//   precision  a copy; an out-of-range index is reported and writes 0
template <typename T>
__global__ void gather_kernel(T* __restrict__ out, const T* __restrict__ x, const int64_t* __restrict__ index,
                              int64_t total, IndexGeometry g, int64_t n, DeviceError* error) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t j = index[e];
    if (j < 0 || j >= n) {
      report_device_error(error, DeviceErrorCode::kIndexOutOfRange, OpId::gather, j, e, n);
      out[e] = T(0);
      continue;
    }
    int64_t c[kIndexMaxDims];
    coords_of(g, e, c);
    int64_t offset = 0;
    for (int d = 0; d < g.rank; ++d) offset += (d == g.dim ? j : c[d]) * g.strides[0][d];
    out[e] = x[offset];
  }
}

// scatter_add_kernel<T>
//   formula    out[p with p[dim] = index[p]] += src[p] for p in index's shape
//   split      one thread per line (every coordinate but dim), grid-stride; the
//              thread walks its line's K entries in order. Lines write disjoint
//              outputs, so there are no races and no atomics
//   launch     256 threads, blocks = min(ceil(lines / 256), 32 x SMs)
//   bytes      per index element 8 B index + 1 read of src + 1 read and 1 write of out
//   precision  adds in T (like torch's scatter_add), in index order: deterministic.
//              Parallelism is the number of lines: a 1-D scatter is one thread
//              (index_add is the parallel form for that shape)
template <typename T>
__global__ void scatter_add_kernel(T* __restrict__ out, const T* __restrict__ src, const int64_t* __restrict__ index,
                                   int64_t lines, IndexGeometry g, int64_t n, DeviceError* error) {
  const int64_t k_count = g.sizes[g.dim];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += stride) {
    const ScatterLine at = scatter_line(g, l);
    const int64_t o_base = at.out, s_base = at.src, i_base = at.index;
    for (int64_t k = 0; k < k_count; ++k) {
      const int64_t j = index[i_base + k * g.strides[2][g.dim]];
      if (j < 0 || j >= n) {
        report_device_error(error, DeviceErrorCode::kIndexOutOfRange, OpId::scatter_add, j,
                            i_base + k * g.strides[2][g.dim], n);
        continue;
      }
      T& slot = out[o_base + j * g.strides[0][g.dim]];
      slot = static_cast<T>(slot + src[s_base + k * g.strides[1][g.dim]]);
    }
  }
}

// trilu_kernel<T>
//   formula    out[..., r, c] = keep ? x[..., r, c] : 0, keep = c - r <= k (tril) or >= k (triu)
//   split      one thread per element, grid-stride; launch as map_kernel
//   bytes      1 read + 1 write of T per element
template <typename T>
__global__ void trilu_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t total, int64_t rows, int64_t cols,
                             int64_t diagonal, bool upper) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t c = e % cols, r = (e / cols) % rows;
    const bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
    out[e] = keep ? x[e] : T(0);
  }
}

// arange_kernel<T>
//   formula    out[i] = convert(start + i * step), computed in double (as the CPU)
//   split      one thread per element, grid-stride; launch as map_kernel
//   bytes      1 write of T per element, nothing read
template <typename T>
__global__ void arange_kernel(T* __restrict__ out, int64_t n, double start, double step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    out[e] = convert_value<T>(start + static_cast<double>(e) * step);
  }
}

}  // namespace

void index_select(OpId op, const Tensor& out, const Tensor& x, const Tensor& index) {
  ::hg::detail::check_index_select_buffers(out, x, index);
  const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2), k_count = index.size(0);
  DeviceGuard guard(x.device().index);
  const Stream launch_stream = current_stream();
  DeviceError* error = device_error_slot(launch_stream);  // notes the stream for the next check
  dispatch_compute_dtype(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(index_select_kernel<T>, dim3(map_grid(outer * k_count * inner)), dim3(kIndexThreads), 0,
              launch_stream.handle(), static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()),
              static_cast<const int64_t*>(index.data_ptr()), outer, n, k_count, inner, error, static_cast<int>(op));
  });
}

void index_add(OpId op, const Tensor& out, const Tensor& index, const Tensor& src, int64_t skip_index) {
  HG_CHECK(out.dim() == 3 && src.dim() == 3 && out.is_contiguous() && src.is_contiguous() && index.dim() == 1 &&
               index.is_contiguous() && index.dtype() == kI64 && src.size(0) == out.size(0) &&
               src.size(2) == out.size(2) && src.size(1) == index.size(0) && src.dtype() == out.dtype(),
           "cuda::index_add: wants contiguous out [outer, n, inner], src [outer, K, inner] and i64 index [K], got ",
           out.shape_str(), ", ", src.shape_str(), ", ", index.shape_str());
  HG_CHECK(out.dtype() != kBool, op_name(op), ": bool tensors cannot be added into");
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), k_count = index.size(0);
  HG_CHECK(n < INT32_MAX && k_count < INT32_MAX, op_name(op), ": sizes ", n, " and ", k_count,
           " exceed the 32-bit keys of the sort");
  if (k_count == 0) return;
  DeviceGuard guard(out.device().index);
  const Stream launch_stream = current_stream();
  const cudaStream_t stream = launch_stream.handle();
  DeviceError* error = device_error_slot(launch_stream);
  const TensorOptions i32{.dtype = kI32, .device = out.device()};
  Tensor keys = empty({k_count}, i32), vals = empty({k_count}, i32);
  Tensor keys_alt = empty({k_count}, i32), vals_alt = empty({k_count}, i32);
  const int64_t skip = skip_index >= 0 && skip_index < n ? skip_index : -1;
  HG_LAUNCH(index_keys_kernel, dim3(map_grid(k_count)), dim3(kIndexThreads), 0, stream,
            static_cast<const int64_t*>(index.data_ptr()), keys.data<int32_t>(), vals.data<int32_t>(), k_count, n, skip,
            error, static_cast<int>(op));
  // Stable LSD radix sort over the bits that n (the largest key) needs.
  int bits = 0;
  while (bits < 31 && (int64_t{1} << bits) <= n) ++bits;
  const int64_t tiles = (k_count + kRadixTile - 1) / kRadixTile;
  Tensor hist = empty({kRadixBins * tiles}, i32);
  for (int shift = 0; shift < bits; shift += kRadixBits) {
    HG_LAUNCH(radix_histogram_kernel, dim3(static_cast<unsigned>(tiles)), dim3(kRadixTile), 0, stream,
              keys.data<int32_t>(), k_count, shift, hist.data<int32_t>(), tiles);
    HG_LAUNCH(exclusive_scan_kernel, dim3(1), dim3(kScanThreads), 0, stream, hist.data<int32_t>(), hist.numel());
    HG_LAUNCH(radix_scatter_kernel, dim3(static_cast<unsigned>(tiles)), dim3(kRadixTile), 0, stream,
              keys.data<int32_t>(), vals.data<int32_t>(), keys_alt.data<int32_t>(), vals_alt.data<int32_t>(), k_count,
              shift, hist.data<int32_t>(), tiles);
    std::swap(keys, keys_alt);
    std::swap(vals, vals_alt);
  }
  const int64_t work = outer * inner;
  const int threads =
      static_cast<int>(std::min<int64_t>(kIndexThreads, (work + kWarpSize - 1) / kWarpSize * kWarpSize));
  dispatch_compute_dtype(out.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      HG_LAUNCH(index_add_runs_kernel<T>, dim3(static_cast<unsigned>(std::min(k_count, kMaxRunBlocks))),
                dim3(std::max(threads, kWarpSize)), 0, stream, static_cast<T*>(out.data_ptr()),
                static_cast<const T*>(src.data_ptr()), keys.data<int32_t>(), vals.data<int32_t>(), k_count, outer, n,
                inner);
    }
  });
}

void gather(const Tensor& out, const Tensor& x, const Tensor& index, const IndexGeometry& g) {
  ::hg::detail::check_geometry(g, index);
  HG_CHECK(out.is_contiguous() && out.sizes() == index.sizes() && x.is_contiguous() && out.dtype() == x.dtype(),
           "cuda::gather: wants contiguous out shaped like index and a contiguous x");
  const int64_t total = index.numel();
  DeviceGuard guard(x.device().index);
  const Stream launch_stream = current_stream();
  DeviceError* error = device_error_slot(launch_stream);
  dispatch_compute_dtype(x.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(gather_kernel<T>, dim3(map_grid(total)), dim3(kIndexThreads), 0, launch_stream.handle(),
              static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()),
              static_cast<const int64_t*>(index.data_ptr()), total, g, x.size(g.dim), error);
  });
}

void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, const IndexGeometry& g) {
  ::hg::detail::check_geometry(g, index);
  HG_CHECK(out.is_contiguous() && out.dim() == g.rank && src.dtype() == out.dtype() && out.dtype() != kBool,
           "cuda::scatter_add: wants a contiguous non-bool out of the index's rank and src of out's dtype");
  const int64_t lines = index.numel() / g.sizes[g.dim];
  DeviceGuard guard(out.device().index);
  const Stream launch_stream = current_stream();
  DeviceError* error = device_error_slot(launch_stream);
  dispatch_compute_dtype(out.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      HG_LAUNCH(scatter_add_kernel<T>, dim3(map_grid(lines)), dim3(kIndexThreads), 0, launch_stream.handle(),
                static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
                static_cast<const int64_t*>(index.data_ptr()), lines, g, out.size(g.dim), error);
    }
  });
}

void trilu(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  HG_CHECK(
      out.is_contiguous() && x.is_contiguous() && x.dim() >= 2 && out.sizes() == x.sizes() && out.dtype() == x.dtype(),
      "cuda::trilu: wants contiguous out and x of one shape and dtype, rank >= 2");
  const int64_t total = x.numel();
  DeviceGuard guard(x.device().index);
  dispatch_compute_dtype(x.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(trilu_kernel<T>, dim3(map_grid(total)), dim3(kIndexThreads), 0, current_stream().handle(),
              static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()), total, x.size(-2), x.size(-1),
              diagonal, upper);
  });
}

void arange(const Tensor& out, double start, double step) {
  HG_CHECK(out.dim() == 1 && out.is_contiguous() && out.is_cuda(), "cuda::arange: wants a contiguous 1-D CUDA tensor");
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  dispatch_compute_dtype(out.dtype(), "arange", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(arange_kernel<T>, dim3(map_grid(n)), dim3(kIndexThreads), 0, current_stream().handle(),
              static_cast<T*>(out.data_ptr()), n, start, step);
  });
}

namespace {
// core's hg::arange on CUDA tensors runs on the device (Note [Copy kernels] in core/copy.h).
const bool kRegistered = [] {
  register_arange_kernel(DeviceType::CUDA, &arange);
  return true;
}();
}  // namespace

}  // namespace hg::cuda
