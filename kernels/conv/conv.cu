// CUDA conv2d through cuDNN 9's legacy convolution API (forward, backward-
// data, backward-filter), plus two hand-written kernels for the bias (fill and
// reduce). The cuda-emu build serves the same cuDNN calls from CPU stand-ins
// in runtime/emu/runtime_cudnn.cpp, so this file is identical in both builds.
// CPU reference: kernels/conv/conv_cpu.cpp; formulas: kernels/conv/conv.h; the API
// choice and its limits: kernels/conv/CUDNN.md, "Convolution on CUDA: cuDNN".
//
// Per call: descriptors for x, w, y (4-D, by strides), a convolution
// descriptor (symmetric padding, stride, dilation, groups, cross-correlation,
// compute type FLOAT, DOUBLE for f64), an algorithm from the _v7 heuristics
// (the first deterministic one, cached per problem), its workspace from the
// caching allocator on the current stream, the convolution call; every call is
// checked with HG_CUDNN_CHECK.
//
// Layouts: x NCHW-contiguous runs with an NCHW (KCRS) filter; x channels-last
// runs with an NHWC (KRSC) filter (w copied to channels-last when it is not),
// d_y is brought to x's layout, so cuDNN sees one consistent layout. A pass
// for which cuDNN offers no deterministic algorithm in channels-last (real
// cuDNN 9: depthwise f32 backward-data) runs in NCHW instead: x, w and d_y are
// transposed, the result is copied back into the caller's layout. Other
// strides are made contiguous first; f64 always runs NCHW (copied back into
// channels-last outputs), since cuDNN's NHWC kernels target 16-bit and f32. Asymmetric padding (padding "same" with
// an even dilated kernel) is not expressible in cuDNN: the input is padded
// explicitly by the difference, as PyTorch does.
//
// Bias: y is first filled with b[o] (conv_bias_fill_kernel), then the forward
// runs with beta = 1, so cuDNN blends conv + bias in fp32 and rounds once (an
// add after a 16-bit conv would round twice; PyTorch's cudnnAddTensor does).
//
// Precision contract: f16/bf16 data with fp32 compute type and
// CUDNN_TENSOR_OP_MATH (tensor cores, fp32 accumulation, one rounding on
// store); f32 with CUDNN_FMA_MATH (full fp32, no TF32, so results agree with
// the CPU to the f32 tolerance); f64 with the DOUBLE compute type.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/conv/conv.h"
#include "kernels/cuda/block_reduce.cuh"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_limits.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

// ---- bias kernels ---------------------------------------------------------------------------

struct BiasView {
  int64_t n, c, h, w;      // sizes
  int64_t sn, sc, sh, sw;  // strides
};

BiasView bias_view(const Tensor& t) {
  return {t.size(0), t.size(1), t.size(2), t.size(3), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// conv_bias_fill_kernel<T>                              | conv_bias_backward_kernel<T>
//   formula  y[n,o,i,j] = b[o] (then the conv adds to    |   d_b[o] = sum_{n,i,j} d_y[n,o,i,j]
//            it with beta = 1)                           |
//   split    one thread per y element (flat index in     |   one block per output channel (grid-stride
//            logical NCHW order, through y's strides)    |   over O); threads stride over the N*OH*OW
//                                                        |   elements, block_allreduce in warp order
//   launch   256 threads, ceil(numel/256) blocks capped  |   256 threads, min(O, 65535) blocks
//            at 8192, grid-stride                        |
//   bytes    per element: 1 write of T (b from cache);   |   1 read of T per d_y element, O writes
//            the conv then reads y once more (beta = 1)  |
//   precision exact copy of b                            |   acc_t<T> sum (fixed order, no atomics),
//                                                        |   one rounding on store
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    conv_bias_fill_kernel(T* __restrict__ y, BiasView v, const T* __restrict__ bias) {
  const int64_t total = v.n * v.c * v.h * v.w;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = e % v.w, h = (e / v.w) % v.h, c = (e / (v.w * v.h)) % v.c, n = e / (v.w * v.h * v.c);
    y[n * v.sn + c * v.sc + h * v.sh + w * v.sw] = bias[c];
  }
}

template <typename A>
__device__ __forceinline__ A add_values(A a, A b) {
  return a + b;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    conv_bias_backward_kernel(const T* __restrict__ d_y, BiasView v, T* __restrict__ d_b) {
  using A = acc_t<T>;
  __shared__ A partials[kBlockThreads / kWarpSize];
  const int64_t m = v.n * v.h * v.w, hw = v.h * v.w;
  for (int64_t c = blockIdx.x; c < v.c; c += gridDim.x) {
    A s = A(0);
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
      const int64_t n = k / hw, r = k % hw;
      s += static_cast<A>(d_y[n * v.sn + c * v.sc + (r / v.w) * v.sh + (r % v.w) * v.sw]);
    }
    s = block_allreduce(s, add_values<A>, partials);
    if (threadIdx.x == 0) d_b[c] = static_cast<T>(s);
  }
}

// ---- cuDNN plumbing -------------------------------------------------------------------------

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::F64:
      return CUDNN_DATA_DOUBLE;
    default:
      HG_FAIL("conv2d: no cuDNN convolution for dtype ", t);
  }
}

int as_int(int64_t v, const char* what) {
  HG_CHECK(v >= 0 && v <= INT_MAX, "conv2d: ", what, " ", v,
           " does not fit cuDNN's 32-bit descriptors; split the batch");
  return static_cast<int>(v);
}

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  explicit TensorDesc(const Tensor& t) {
    HG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    HG_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(
        d, cudnn_type(t.dtype()), as_int(t.size(0), "N"), as_int(t.size(1), "C"), as_int(t.size(2), "H"),
        as_int(t.size(3), "W"), as_int(std::max<int64_t>(t.stride(0), 1), "stride"),
        as_int(std::max<int64_t>(t.stride(1), 1), "stride"), as_int(std::max<int64_t>(t.stride(2), 1), "stride"),
        as_int(std::max<int64_t>(t.stride(3), 1), "stride")));
  }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

// w [O, Cg, KH, KW] contiguous (KCRS) or channels-last (KRSC).
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  explicit FilterDesc(const Tensor& w) {
    HG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d));
    HG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        d, cudnn_type(w.dtype()), ::hg::is_channels_last(w) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        as_int(w.size(0), "O"), as_int(w.size(1), "C/groups"), as_int(w.size(2), "KH"), as_int(w.size(3), "KW")));
  }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const Conv2dParams& p, DType dtype) {
    HG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    HG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d, as_int(p.pad_lo[0], "padding"), as_int(p.pad_lo[1], "padding"), as_int(p.stride[0], "stride"),
        as_int(p.stride[1], "stride"), as_int(p.dilation[0], "dilation"), as_int(p.dilation[1], "dilation"),
        CUDNN_CROSS_CORRELATION, dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    HG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, as_int(p.groups, "groups")));
    const bool sixteen = dtype == DType::F16 || dtype == DType::BF16;
    HG_CUDNN_CHECK(cudnnSetConvolutionMathType(d, sixteen ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// A workspace from the caching allocator on the current stream; freed after
// the call was enqueued (stream-ordered reuse is safe).
struct Workspace {
  void* ptr = nullptr;
  explicit Workspace(size_t bytes) {
    if (bytes > 0) ptr = caching_allocator().allocate(bytes);
  }
  ~Workspace() { caching_allocator().free(ptr); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

enum class Pass : int64_t { kForward, kBackwardData, kBackwardFilter };

// The algorithm cache: one heuristic query per (pass, device, dtype, shapes,
// layouts, geometry).
std::vector<int64_t> problem_key(Pass pass, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  std::vector<int64_t> k{static_cast<int64_t>(pass), x.device().index, static_cast<int64_t>(x.dtype()),
                         ::hg::is_channels_last(x) ? 1 : 0};
  for (int d = 0; d < 4; ++d) k.push_back(x.size(d));
  for (int d = 0; d < 4; ++d) k.push_back(w.size(d));
  for (int d = 0; d < 2; ++d) {
    k.push_back(p.stride[d]);
    k.push_back(p.pad_lo[d]);
    k.push_back(p.dilation[d]);
  }
  k.push_back(p.groups);
  return k;
}

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::vector<int64_t>, int>& algo_cache() {
  static auto* cache = new std::map<std::vector<int64_t>, int>();  // never destroyed (static teardown)
  return *cache;
}

// The first deterministic algorithm the heuristics list with status SUCCESS;
// kNoAlgorithm when there is none (the caller falls back to NCHW).
constexpr int kNoAlgorithm = -1;
template <typename Perf>
int pick_algorithm(const Perf* perf, int count) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) {
      return static_cast<int>(perf[i].algo);
    }
  }
  return kNoAlgorithm;
}

template <typename Query>
int cached_algorithm(const std::vector<int64_t>& key, Query&& query) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    const auto it = algo_cache().find(key);
    if (it != algo_cache().end()) return it->second;
  }
  const int algo = query();
  std::lock_guard<std::mutex> lock(cache_mutex());
  algo_cache()[key] = algo;
  return algo;
}

// Scaling factors: float for f32/f16/bf16 data, double for f64.
struct Scales {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  bool wide;
  explicit Scales(DType t) : wide(t == DType::F64) {}
  const void* one() const { return wide ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return wide ? static_cast<const void*>(&d0) : &f0; }
};

// A tensor of shape `shape` in `like`'s layout (channels-last stays channels-last).
Tensor empty_in_layout(int64_t n, int64_t c, int64_t h, int64_t w, const Tensor& like, bool channels_last) {
  if (channels_last) return empty({n, h, w, c}, {.dtype = like.dtype(), .device = like.device()}).permute({0, 3, 1, 2});
  return empty({n, c, h, w}, {.dtype = like.dtype(), .device = like.device()});
}

Tensor to_layout(const Tensor& t, bool channels_last) {
  if (channels_last) {
    if (::hg::is_channels_last(t)) return t;
    Tensor out = empty_in_layout(t.size(0), t.size(1), t.size(2), t.size(3), t, true);
    out.copy_(t.detach());  // a kernel copies values; autograd records the op above it
    return out;
  }
  return t.contiguous();
}

// The problem as cuDNN sees it: consistent layouts, symmetric padding.
struct Prepared {
  bool channels_last;
  Tensor x;                               // padded by the asymmetric part, in the chosen layout
  Tensor w;                               // KCRS or KRSC to match
  Conv2dParams p;                         // pad_lo == pad_hi
  std::array<int64_t, 2> extra_lo{0, 0};  // explicit padding added before x (per spatial dim)
};

// allow_channels_last = false: NCHW whatever x's layout (the fallback when
// cuDNN has no deterministic algorithm for the channels-last problem).
Prepared prepare(const Tensor& x, const Tensor& w, const Conv2dParams& p, bool allow_channels_last = true) {
  Prepared r;
  // f64 runs NCHW whatever x's layout (cuDNN's NHWC kernels are for 16-bit
  // and f32; results are copied back into the channels-last outputs).
  r.channels_last = allow_channels_last && ::hg::is_channels_last(x) && x.dtype() != DType::F64;
  r.x = to_layout(x, r.channels_last);
  r.w = to_layout(w, r.channels_last);
  r.p = p;
  std::array<int64_t, 2> extra_hi{0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t sym = std::min(p.pad_lo[d], p.pad_hi[d]);
    r.extra_lo[d] = p.pad_lo[d] - sym;
    extra_hi[d] = p.pad_hi[d] - sym;
    r.p.pad_lo[d] = r.p.pad_hi[d] = sym;
  }
  if (r.extra_lo != std::array<int64_t, 2>{0, 0} || extra_hi != std::array<int64_t, 2>{0, 0}) {
    Tensor padded = empty_in_layout(x.size(0), x.size(1), x.size(2) + r.extra_lo[0] + extra_hi[0],
                                    x.size(3) + r.extra_lo[1] + extra_hi[1], x, r.channels_last);
    padded.zero_();
    padded.narrow(2, r.extra_lo[0], x.size(2)).narrow(3, r.extra_lo[1], x.size(3)).copy_(r.x.detach());
    r.x = padded;
  }
  return r;
}

dim3 elementwise_grid(int64_t n) {
  return dim3(static_cast<unsigned>(std::min<int64_t>((n + kBlockThreads - 1) / kBlockThreads, 8192)));
}

// ---- the three passes, each in the layout of a Prepared problem ------------------------------
//
// Each returns false, having written nothing, when cuDNN's heuristics offer no
// deterministic algorithm for the problem in that layout; the entry points
// below then run the same pass once more in NCHW (inputs transposed, results
// copied back into the caller's layout). Real cuDNN 9 has no deterministic
// backward-data algorithm for depthwise channels-last f32 (kernels/conv/CUDNN.md,
// "No deterministic algorithm: the NCHW fallback").

bool run_forward(const Tensor& y, const Prepared& pr, const Tensor& bias, DType dtype) {
  // y is in x's layout (the ops layer allocates it so); a non-standard y gets a temporary.
  const Tensor out = (pr.channels_last ? ::hg::is_channels_last(y) : y.is_contiguous())
                         ? y
                         : empty_in_layout(y.size(0), y.size(1), y.size(2), y.size(3), y, pr.channels_last);
  cudnnHandle_t handle = cudnn_handle();
  const TensorDesc xd(pr.x), yd(out);
  const FilterDesc wd(pr.w);
  const ConvDesc cd(pr.p, dtype);
  const int found = cached_algorithm(problem_key(Pass::kForward, pr.x, pr.w, pr.p), [&] {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    HG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, xd.d, wd.d, cd.d, yd.d,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    return pick_algorithm(perf, count);
  });
  if (found == kNoAlgorithm) return false;
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(found);
  size_t bytes = 0;
  HG_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, xd.d, wd.d, cd.d, yd.d, algo, &bytes));
  const Workspace ws(bytes);
  const Scales s(dtype);
  if (bias.defined()) {
    const Tensor b = bias.contiguous();
    const cudaStream_t stream = current_stream().handle();
    dispatch_floating(dtype, "conv2d bias", [&](auto tag) {
      using T = decltype(tag);
      HG_LAUNCH(conv_bias_fill_kernel<T>, elementwise_grid(out.numel()), dim3(kBlockThreads), 0, stream,
                static_cast<T*>(out.data_ptr()), bias_view(out), static_cast<const T*>(b.data_ptr()));
    });
  }
  HG_CUDNN_CHECK(cudnnConvolutionForward(handle, s.one(), xd.d, pr.x.data_ptr(), wd.d, pr.w.data_ptr(), cd.d, algo,
                                         ws.ptr, bytes, bias.defined() ? s.one() : s.zero(), yd.d, out.data_ptr()));
  if (out.data_ptr() != y.data_ptr()) const_cast<Tensor&>(y).copy_(out);
  return true;
}

// d_x from d_y (already in pr's layout); x gives the unpadded extent.
bool run_backward_data(const Tensor& d_x, const Prepared& pr, const Tensor& g, const Tensor& x) {
  cudnnHandle_t handle = cudnn_handle();
  const Scales s(x.dtype());
  const TensorDesc gd(g);
  const ConvDesc cd(pr.p, x.dtype());
  const bool padded = pr.x.size(2) != x.size(2) || pr.x.size(3) != x.size(3);
  const bool direct = !padded && (pr.channels_last ? ::hg::is_channels_last(d_x) : d_x.is_contiguous());
  const Tensor out =
      direct ? d_x : empty_in_layout(pr.x.size(0), pr.x.size(1), pr.x.size(2), pr.x.size(3), x, pr.channels_last);
  const TensorDesc xd(out);
  const FilterDesc wd(pr.w);
  const int found = cached_algorithm(problem_key(Pass::kBackwardData, pr.x, pr.w, pr.p), [&] {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    HG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, wd.d, gd.d, cd.d, xd.d,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    return pick_algorithm(perf, count);
  });
  if (found == kNoAlgorithm) return false;
  const auto algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(found);
  size_t bytes = 0;
  HG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wd.d, gd.d, cd.d, xd.d, algo, &bytes));
  const Workspace ws(bytes);
  HG_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, s.one(), wd.d, pr.w.data_ptr(), gd.d, g.data_ptr(), cd.d, algo,
                                              ws.ptr, bytes, s.zero(), xd.d, out.data_ptr()));
  if (!direct) {
    const_cast<Tensor&>(d_x).copy_(out.narrow(2, pr.extra_lo[0], x.size(2)).narrow(3, pr.extra_lo[1], x.size(3)));
  }
  return true;
}

// d_w (contiguous, KCRS) from x and d_y (in pr's layout).
bool run_backward_filter(const Tensor& d_w, const Prepared& pr, const Tensor& g, const Tensor& w) {
  cudnnHandle_t handle = cudnn_handle();
  const Scales s(w.dtype());
  const TensorDesc gd(g);
  const ConvDesc cd(pr.p, w.dtype());
  // The filter gradient in the filter layout cuDNN runs with; copied into d_w (contiguous) when that differs.
  const Tensor out =
      pr.channels_last
          ? to_layout(empty({w.size(0), w.size(1), w.size(2), w.size(3)}, {.dtype = w.dtype(), .device = w.device()}),
                      true)
          : d_w;
  const TensorDesc xd(pr.x);
  const FilterDesc wd(out);
  const int found = cached_algorithm(problem_key(Pass::kBackwardFilter, pr.x, pr.w, pr.p), [&] {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    HG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, xd.d, gd.d, cd.d, wd.d, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    return pick_algorithm(perf, count);
  });
  if (found == kNoAlgorithm) return false;
  const auto algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(found);
  size_t bytes = 0;
  HG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd.d, gd.d, cd.d, wd.d, algo, &bytes));
  const Workspace ws(bytes);
  HG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, s.one(), xd.d, pr.x.data_ptr(), gd.d, g.data_ptr(), cd.d, algo,
                                                ws.ptr, bytes, s.zero(), wd.d, out.data_ptr()));
  if (out.data_ptr() != d_w.data_ptr()) const_cast<Tensor&>(d_w).copy_(out);
  return true;
}

// NCHW has a deterministic algorithm for every problem cuDNN takes; if one
// ever does not, the error says so instead of running a nondeterministic one.
[[noreturn]] void no_deterministic_algorithm(const char* pass) {
  HG_FAIL("conv2d: cuDNN offers no deterministic ", pass,
          " algorithm for this problem in either layout (channels-last, NCHW); halfgrad keeps convolutions "
          "deterministic");
}

}  // namespace

void conv2d_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  DeviceGuard guard(x.device().index);
  const Prepared pr = prepare(x, w, p);
  if (run_forward(y, pr, bias, x.dtype())) return;
  if (!pr.channels_last || !run_forward(y, prepare(x, w, p, false), bias, x.dtype()))
    no_deterministic_algorithm("forward");
}

void conv2d_backward(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y, const Tensor& x,
                     const Tensor& w, const Conv2dParams& p) {
  DeviceGuard guard(x.device().index);
  const Prepared pr = prepare(x, w, p);
  const Tensor g = to_layout(d_y, pr.channels_last);
  // The NCHW problem, made on first need (one transpose of x, w and d_y for both passes).
  std::optional<Prepared> nchw;
  Tensor g_nchw;
  auto fallback = [&]() -> const Prepared& {
    if (!nchw) {
      nchw = prepare(x, w, p, false);
      g_nchw = to_layout(d_y, false);
    }
    return *nchw;
  };
  if (d_x.defined() && !run_backward_data(d_x, pr, g, x)) {
    if (!pr.channels_last || !run_backward_data(d_x, fallback(), g_nchw, x))
      no_deterministic_algorithm("backward-data");
  }
  if (d_w.defined() && !run_backward_filter(d_w, pr, g, w)) {
    if (!pr.channels_last || !run_backward_filter(d_w, fallback(), g_nchw, w))
      no_deterministic_algorithm("backward-filter");
  }
  if (d_b.defined()) {
    const cudaStream_t stream = current_stream().handle();
    dispatch_floating(x.dtype(), "conv2d bias backward", [&](auto tag) {
      using T = decltype(tag);
      HG_LAUNCH(conv_bias_backward_kernel<T>, dim3(static_cast<unsigned>(std::min<int64_t>(g.size(1), 65535))),
                dim3(kBlockThreads), 0, stream, static_cast<const T*>(g.data_ptr()), bias_view(g),
                static_cast<T*>(d_b.data_ptr()));
    });
  }
}

}  // namespace hg::cuda
