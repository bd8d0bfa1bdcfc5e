// cuda-emu stand-in for cuDNN: handle lifecycle, stream binding, version and
// status strings, and the legacy convolution API kernels/conv/conv.cu calls
// (descriptors, heuristics, workspace sizes, forward and both backwards),
// computed on the CPU (semantics: the comment above the convolution part).
#include <cstdint>
#include <cstring>
#include <new>

#include <cudnn.h>

#include "core/half.h"

#include "runtime/emu/runtime_internal.h"

struct cudnnContext {
  int device = 0;
  cudaStream_t stream = nullptr;
};

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
      return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED:
      return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND:
      return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
      return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT:
      return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_INTERNAL_ERROR:
      return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // reported as the cuDNN status instead
    return CUDNN_STATUS_NOT_INITIALIZED;
  }
  auto* created = new (std::nothrow) cudnnContext;
  if (created == nullptr) return CUDNN_STATUS_INTERNAL_ERROR;
  created->device = hg::emu::detail::current_device();
  *handle = created;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (!hg::emu::detail::is_valid_stream(streamId)) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (handle == nullptr || streamId == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution (legacy API, as kernels/conv/conv.cu calls it) -----------------------------
//
// Semantics follow the cuDNN 9 API reference: 4-D tensor descriptors with any
// positive strides (NCHW or NHWC or other), filters in NCHW (KCRS) or NHWC
// (KRSC) format, symmetric padding, stride, dilation, groups, cross-
// correlation or convolution mode; out = alpha * op(in) + beta * out, where
// beta == 0 means `out` is not read; alpha/beta point at float for float,
// half and bfloat16 data and at double for double data.
// Status codes: NULL/unset descriptors, mismatched shapes or an output
// descriptor that is not the convolution's output shape, or a workspace
// smaller than the algorithm's size: CUDNN_STATUS_BAD_PARAM; a data/compute
// type combination cuDNN does not offer (bf16 or float data need a FLOAT
// compute type, double needs DOUBLE): CUDNN_STATUS_NOT_SUPPORTED.
// The stand-in implements the algorithms its heuristics return (forward:
// IMPLICIT_PRECOMP_GEMM, IMPLICIT_GEMM, GEMM; backward data and filter: ALGO_1,
// ALGO_0) and answers CUDNN_STATUS_NOT_SUPPORTED for the others (FFT,
// Winograd), which a real GPU would run. Their determinism flags follow real
// cuDNN, including its gap (no_deterministic_backward below). Every algorithm computes the same
// direct sum: fp32 accumulation (fp64 for double), one rounding on store; fp32
// data under CUDNN_DEFAULT_MATH / CUDNN_TENSOR_OP_MATH is first rounded to
// TF32 as Ampere+ tensor cores do (CUDNN_FMA_MATH keeps full fp32). The
// workspace is filled with a pattern, so a short buffer shows up under ASan.
// Cost: one multiply-add per (output, Cg*KH*KW) term, about 1 GFLOP/s on one
// core: fine for test-sized problems.

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t dim[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int64_t dim[4] = {0, 0, 0, 0};  // k, c, h, w
};

struct cudnnConvolutionStruct {
  bool set = false;
  int pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace {

size_t cudnn_element_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
      return 2;
    case CUDNN_DATA_FLOAT:
      return 4;
    case CUDNN_DATA_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

float round_tf32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round to nearest even at 10 mantissa bits
    u += 0xfffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
  }
  std::memcpy(&f, &u, sizeof f);
  return f;
}

double load(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_HALF:
      return static_cast<float>(static_cast<const hg::half*>(p)[i]);
    case CUDNN_DATA_BFLOAT16:
      return static_cast<float>(static_cast<const hg::bfloat16*>(p)[i]);
    case CUDNN_DATA_FLOAT:
      return static_cast<const float*>(p)[i];
    default:
      return static_cast<const double*>(p)[i];
  }
}

void store(void* p, cudnnDataType_t t, int64_t i, double v) {
  switch (t) {
    case CUDNN_DATA_HALF:
      static_cast<hg::half*>(p)[i] = hg::half(static_cast<float>(v));
      break;
    case CUDNN_DATA_BFLOAT16:
      static_cast<hg::bfloat16*>(p)[i] = hg::bfloat16(static_cast<float>(v));
      break;
    case CUDNN_DATA_FLOAT:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(p)[i] = v;
  }
}

// The resolved problem: x [N,C,H,W], w [K,Cg,R,S], y [N,K,P,Q], all by strides.
struct ConvProblem {
  cudnnDataType_t type;
  bool wide;  // double accumulation
  bool tf32;  // fp32 inputs rounded to TF32 first
  int64_t N, C, H, W, K, Cg, R, S, P, Q, G;
  int64_t xs[4], ys[4], ws[4];
  int64_t pad[2], str[2], dil[2];
  bool flip;  // CUDNN_CONVOLUTION mode
};

cudnnStatus_t resolve(const cudnnTensorStruct* x, const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                      const cudnnTensorStruct* y, ConvProblem& pr) {
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (!x->set || !w->set || !conv->set || !y->set) return CUDNN_STATUS_BAD_PARAM;
  if (x->type != w->type || x->type != y->type) return CUDNN_STATUS_BAD_PARAM;
  const cudnnDataType_t t = x->type;
  const bool ok_compute = t == CUDNN_DATA_DOUBLE ? conv->compute == CUDNN_DATA_DOUBLE
                                                 : (conv->compute == CUDNN_DATA_FLOAT ||
                                                    (t == CUDNN_DATA_HALF && conv->compute == CUDNN_DATA_HALF));
  if (!ok_compute) return CUDNN_STATUS_NOT_SUPPORTED;
  pr.type = t;
  pr.wide = t == CUDNN_DATA_DOUBLE;
  pr.tf32 = t == CUDNN_DATA_FLOAT && (conv->math == CUDNN_DEFAULT_MATH || conv->math == CUDNN_TENSOR_OP_MATH);
  pr.N = x->dim[0], pr.C = x->dim[1], pr.H = x->dim[2], pr.W = x->dim[3];
  pr.K = w->dim[0], pr.Cg = w->dim[1], pr.R = w->dim[2], pr.S = w->dim[3];
  pr.G = conv->groups;
  if (pr.Cg * pr.G != pr.C || pr.K % pr.G != 0) return CUDNN_STATUS_BAD_PARAM;
  for (int d = 0; d < 2; ++d) {
    pr.pad[d] = conv->pad[d], pr.str[d] = conv->stride[d], pr.dil[d] = conv->dilation[d];
  }
  const int64_t span_h = pr.dil[0] * (pr.R - 1) + 1, span_w = pr.dil[1] * (pr.S - 1) + 1;
  if (pr.H + 2 * pr.pad[0] < span_h || pr.W + 2 * pr.pad[1] < span_w) return CUDNN_STATUS_BAD_PARAM;
  pr.P = (pr.H + 2 * pr.pad[0] - span_h) / pr.str[0] + 1;
  pr.Q = (pr.W + 2 * pr.pad[1] - span_w) / pr.str[1] + 1;
  if (y->dim[0] != pr.N || y->dim[1] != pr.K || y->dim[2] != pr.P || y->dim[3] != pr.Q) return CUDNN_STATUS_BAD_PARAM;
  for (int d = 0; d < 4; ++d) pr.xs[d] = x->stride[d], pr.ys[d] = y->stride[d];
  if (w->format == CUDNN_TENSOR_NHWC) {  // KRSC
    pr.ws[0] = pr.R * pr.S * pr.Cg, pr.ws[1] = 1, pr.ws[2] = pr.S * pr.Cg, pr.ws[3] = pr.Cg;
  } else {  // KCRS
    pr.ws[0] = pr.Cg * pr.R * pr.S, pr.ws[1] = pr.R * pr.S, pr.ws[2] = pr.S, pr.ws[3] = 1;
  }
  pr.flip = conv->mode == CUDNN_CONVOLUTION;
  return CUDNN_STATUS_SUCCESS;
}

// Real cuDNN 9 (H200, sm_90) lists no deterministic backward-data algorithm
// for a depthwise problem (one input channel a group) in channels-last (x's
// channel stride 1; a [K, 1, R, S] filter is the same memory in either
// format) with f32 data: all its candidates are CUDNN_NON_DETERMINISTIC. The
// stand-in's heuristics answer the same for backward-data and, to keep the
// caller's fallback for that pass covered too, for backward-filter (on the
// H200 that pass was never reached); NCHW and the other dtypes are unaffected.
bool no_deterministic_backward(const ConvProblem& pr) {
  return pr.xs[1] == 1 && pr.C > 1 && pr.type == CUDNN_DATA_FLOAT && pr.Cg == 1 && pr.G > 1;
}

int64_t at4(const int64_t* s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * s[0] + b * s[1] + c * s[2] + d * s[3];
}

// One operand value as the multiplier sees it.
double operand(const ConvProblem& pr, const void* p, int64_t i) {
  const double v = load(p, pr.type, i);
  return pr.tf32 ? static_cast<double>(round_tf32(static_cast<float>(v))) : v;
}

// The scaling factors: float for float/half/bfloat16 data, double for double.
double scale_of(const ConvProblem& pr, const void* s) {
  return pr.wide ? *static_cast<const double*>(s) : static_cast<double>(*static_cast<const float*>(s));
}

void finish(const ConvProblem& pr, void* out, int64_t i, double acc, double alpha, double beta) {
  double v = alpha * acc;
  if (beta != 0.0) v += beta * load(out, pr.type, i);
  store(out, pr.type, i, pr.wide ? v : static_cast<double>(static_cast<float>(v)));
}

template <typename Acc>
void conv_forward(const ConvProblem& pr, const void* x, const void* w, void* y, double alpha, double beta) {
  const int64_t Kg = pr.K / pr.G;
  for (int64_t n = 0; n < pr.N; ++n)
    for (int64_t k = 0; k < pr.K; ++k)
      for (int64_t p = 0; p < pr.P; ++p)
        for (int64_t q = 0; q < pr.Q; ++q) {
          Acc acc = 0;
          const int64_t g = k / Kg;
          for (int64_t c = 0; c < pr.Cg; ++c)
            for (int64_t r = 0; r < pr.R; ++r) {
              const int64_t h = p * pr.str[0] - pr.pad[0] + r * pr.dil[0];
              if (h < 0 || h >= pr.H) continue;
              for (int64_t s = 0; s < pr.S; ++s) {
                const int64_t ww = q * pr.str[1] - pr.pad[1] + s * pr.dil[1];
                if (ww < 0 || ww >= pr.W) continue;
                const int64_t fr = pr.flip ? pr.R - 1 - r : r, fs = pr.flip ? pr.S - 1 - s : s;
                acc += static_cast<Acc>(operand(pr, x, at4(pr.xs, n, g * pr.Cg + c, h, ww))) *
                       static_cast<Acc>(operand(pr, w, at4(pr.ws, k, c, fr, fs)));
              }
            }
          finish(pr, y, at4(pr.ys, n, k, p, q), static_cast<double>(acc), alpha, beta);
        }
}

template <typename Acc>
void conv_backward_data(const ConvProblem& pr, const void* w, const void* dy, void* dx, double alpha, double beta) {
  const int64_t Kg = pr.K / pr.G;
  for (int64_t n = 0; n < pr.N; ++n)
    for (int64_t ci = 0; ci < pr.C; ++ci)
      for (int64_t h = 0; h < pr.H; ++h)
        for (int64_t ww = 0; ww < pr.W; ++ww) {
          Acc acc = 0;
          const int64_t g = ci / pr.Cg, c = ci % pr.Cg;
          for (int64_t r = 0; r < pr.R; ++r) {
            const int64_t th = h + pr.pad[0] - r * pr.dil[0];
            if (th < 0 || th % pr.str[0] != 0 || th / pr.str[0] >= pr.P) continue;
            for (int64_t s = 0; s < pr.S; ++s) {
              const int64_t tw = ww + pr.pad[1] - s * pr.dil[1];
              if (tw < 0 || tw % pr.str[1] != 0 || tw / pr.str[1] >= pr.Q) continue;
              const int64_t fr = pr.flip ? pr.R - 1 - r : r, fs = pr.flip ? pr.S - 1 - s : s;
              for (int64_t k = g * Kg; k < (g + 1) * Kg; ++k) {
                acc += static_cast<Acc>(operand(pr, dy, at4(pr.ys, n, k, th / pr.str[0], tw / pr.str[1]))) *
                       static_cast<Acc>(operand(pr, w, at4(pr.ws, k, c, fr, fs)));
              }
            }
          }
          finish(pr, dx, at4(pr.xs, n, ci, h, ww), static_cast<double>(acc), alpha, beta);
        }
}

template <typename Acc>
void conv_backward_filter(const ConvProblem& pr, const void* x, const void* dy, void* dw, double alpha, double beta) {
  const int64_t Kg = pr.K / pr.G;
  for (int64_t k = 0; k < pr.K; ++k)
    for (int64_t c = 0; c < pr.Cg; ++c)
      for (int64_t r = 0; r < pr.R; ++r)
        for (int64_t s = 0; s < pr.S; ++s) {
          Acc acc = 0;
          const int64_t ci = (k / Kg) * pr.Cg + c;
          for (int64_t n = 0; n < pr.N; ++n)
            for (int64_t p = 0; p < pr.P; ++p) {
              const int64_t h = p * pr.str[0] - pr.pad[0] + r * pr.dil[0];
              if (h < 0 || h >= pr.H) continue;
              for (int64_t q = 0; q < pr.Q; ++q) {
                const int64_t ww = q * pr.str[1] - pr.pad[1] + s * pr.dil[1];
                if (ww < 0 || ww >= pr.W) continue;
                acc += static_cast<Acc>(operand(pr, dy, at4(pr.ys, n, k, p, q))) *
                       static_cast<Acc>(operand(pr, x, at4(pr.xs, n, ci, h, ww)));
              }
            }
          const int64_t fr = pr.flip ? pr.R - 1 - r : r, fs = pr.flip ? pr.S - 1 - s : s;
          finish(pr, dw, at4(pr.ws, k, c, fr, fs), static_cast<double>(acc), alpha, beta);
        }
}

// Workspace sizes of the implemented algorithms (what a real implementation
// of each would need: an index table, or an im2col buffer); SIZE_MAX = not implemented.
size_t fwd_workspace(const ConvProblem& pr, cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return 0;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return static_cast<size_t>(pr.Cg * pr.R * pr.S) * sizeof(int);
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return static_cast<size_t>(pr.Cg * pr.R * pr.S * pr.P * pr.Q) * cudnn_element_size(pr.type);
    default:
      return SIZE_MAX;
  }
}
size_t bwd_data_workspace(const ConvProblem& pr, cudnnConvolutionBwdDataAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return 0;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return static_cast<size_t>(pr.K / pr.G * pr.R * pr.S) * sizeof(int);
    default:
      return SIZE_MAX;
  }
}
size_t bwd_filter_workspace(const ConvProblem& pr, cudnnConvolutionBwdFilterAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return 0;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return static_cast<size_t>(pr.Cg * pr.R * pr.S * pr.P * pr.Q) * cudnn_element_size(pr.type);
    default:
      return SIZE_MAX;
  }
}

cudnnStatus_t check_run(cudnnHandle_t handle, const void* alpha, const void* beta, const void* a, const void* b,
                        void* out, size_t need, void* workspace, size_t workspace_bytes) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (alpha == nullptr || beta == nullptr || a == nullptr || b == nullptr || out == nullptr)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) return CUDNN_STATUS_BAD_PARAM;
  if (need > 0) std::memset(workspace, 0xa5, need);
  return CUDNN_STATUS_SUCCESS;
}

template <typename Perf, typename Algo>
void fill_perf(Perf* perf, Algo algo, size_t memory, cudnnDeterminism_t det, cudnnMathType_t math) {
  perf->algo = algo;
  perf->status = CUDNN_STATUS_SUCCESS;
  perf->time = -1.0f;  // heuristics do not time
  perf->memory = memory;
  perf->determinism = det;
  perf->mathType = math;
}

}  // namespace

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  if (tensorDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *tensorDesc = new (std::nothrow) cudnnTensorStruct;
  return *tensorDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t dataType, int n, int c, int h,
                                           int w, int nStride, int cStride, int hStride, int wStride) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (cudnn_element_size(dataType) == 0) return CUDNN_STATUS_NOT_SUPPORTED;
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || nStride <= 0 || cStride <= 0 || hStride <= 0 || wStride <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  d->type = dataType;
  const int64_t dims[4] = {n, c, h, w}, strides[4] = {nStride, cStride, hStride, wStride};
  for (int i = 0; i < 4; ++i) d->dim[i] = dims[i], d->stride[i] = strides[i];
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  if (filterDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *filterDesc = new (std::nothrow) cudnnFilterStruct;
  return *filterDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (cudnn_element_size(dataType) == 0) return CUDNN_STATUS_NOT_SUPPORTED;
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) return CUDNN_STATUS_BAD_PARAM;
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  d->type = dataType;
  d->format = format;
  d->dim[0] = k, d->dim[1] = c, d->dim[2] = h, d->dim[3] = w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (convDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *convDesc = new (std::nothrow) cudnnConvolutionStruct;
  return *convDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0) return CUDNN_STATUS_BAD_PARAM;
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
  d->pad[0] = pad_h, d->pad[1] = pad_w, d->stride[0] = u, d->stride[1] = v;
  d->dilation[0] = dilation_h, d->dilation[1] = dilation_w;
  d->mode = mode;
  d->compute = computeType;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groupCount) {
  if (d == nullptr || groupCount < 1) return CUDNN_STATUS_BAD_PARAM;
  d->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t mathType) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
  d->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int* n, int* c, int* h, int* ww) {
  if (conv == nullptr || x == nullptr || w == nullptr || n == nullptr || c == nullptr || h == nullptr ||
      ww == nullptr || !conv->set || !x->set || !w->set)
    return CUDNN_STATUS_BAD_PARAM;
  if (x->dim[1] != w->dim[1] * conv->groups) return CUDNN_STATUS_BAD_PARAM;
  const int64_t oh = (x->dim[2] + 2 * conv->pad[0] - (conv->dilation[0] * (w->dim[2] - 1) + 1)) / conv->stride[0] + 1;
  const int64_t ow = (x->dim[3] + 2 * conv->pad[1] - (conv->dilation[1] * (w->dim[3] - 1) + 1)) / conv->stride[1] + 1;
  if (oh <= 0 || ow <= 0) return CUDNN_STATUS_BAD_PARAM;
  *n = static_cast<int>(x->dim[0]), *c = static_cast<int>(w->dim[0]), *h = static_cast<int>(oh),
  *ww = static_cast<int>(ow);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, const int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  if (handle == nullptr || returned == nullptr || perf == nullptr || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(x, w, conv, y, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const cudnnConvolutionFwdAlgo_t order[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM};
  int count = 0;
  for (const auto algo : order) {
    if (count == requested) break;
    fill_perf(&perf[count++], algo, fwd_workspace(pr, algo), CUDNN_DETERMINISTIC, conv->math);
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t* sizeInBytes) {
  if (handle == nullptr || sizeInBytes == nullptr) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(x, w, conv, y, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const size_t need = fwd_workspace(pr, algo);
  if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
  *sizeInBytes = need;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(xDesc, wDesc, convDesc, yDesc, pr); s != CUDNN_STATUS_SUCCESS) return s;
  if (const cudnnStatus_t s =
          check_run(handle, alpha, beta, x, w, y, fwd_workspace(pr, algo), workSpace, workSpaceSizeInBytes);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  if (pr.wide)
    conv_forward<double>(pr, x, w, y, scale_of(pr, alpha), scale_of(pr, beta));
  else
    conv_forward<float>(pr, x, w, y, scale_of(pr, alpha), scale_of(pr, beta));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, const int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  if (handle == nullptr || returned == nullptr || perf == nullptr || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(dx, w, conv, dy, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const cudnnConvolutionBwdDataAlgo_t order[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
  int count = 0;
  for (const auto algo : order) {
    if (count == requested) break;
    fill_perf(&perf[count++], algo, bwd_data_workspace(pr, algo),
              algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || no_deterministic_backward(pr) ? CUDNN_NON_DETERMINISTIC
                                                                                         : CUDNN_DETERMINISTIC,
              conv->math);
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  if (handle == nullptr || sizeInBytes == nullptr) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(dx, w, conv, dy, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const size_t need = bwd_data_workspace(pr, algo);
  if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
  *sizeInBytes = need;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc,
                                           const void* w, const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(dxDesc, wDesc, convDesc, dyDesc, pr); s != CUDNN_STATUS_SUCCESS) return s;
  if (const cudnnStatus_t s =
          check_run(handle, alpha, beta, w, dy, dx, bwd_data_workspace(pr, algo), workSpace, workSpaceSizeInBytes);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  if (pr.wide)
    conv_backward_data<double>(pr, w, dy, dx, scale_of(pr, alpha), scale_of(pr, beta));
  else
    conv_backward_data<float>(pr, w, dy, dx, scale_of(pr, alpha), scale_of(pr, beta));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, const int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  if (handle == nullptr || returned == nullptr || perf == nullptr || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(x, dw, conv, dy, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const cudnnConvolutionBwdFilterAlgo_t order[] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0};
  int count = 0;
  for (const auto algo : order) {
    if (count == requested) break;
    fill_perf(&perf[count++], algo, bwd_filter_workspace(pr, algo),
              algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || no_deterministic_backward(pr) ? CUDNN_NON_DETERMINISTIC
                                                                                           : CUDNN_DETERMINISTIC,
              conv->math);
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* sizeInBytes) {
  if (handle == nullptr || sizeInBytes == nullptr) return CUDNN_STATUS_BAD_PARAM;
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(x, dw, conv, dy, pr); s != CUDNN_STATUS_SUCCESS) return s;
  const size_t need = bwd_filter_workspace(pr, algo);
  if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
  *sizeInBytes = need;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  ConvProblem pr{};
  if (const cudnnStatus_t s = resolve(xDesc, dwDesc, convDesc, dyDesc, pr); s != CUDNN_STATUS_SUCCESS) return s;
  if (const cudnnStatus_t s =
          check_run(handle, alpha, beta, x, dy, dw, bwd_filter_workspace(pr, algo), workSpace, workSpaceSizeInBytes);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  if (pr.wide)
    conv_backward_filter<double>(pr, x, dy, dw, scale_of(pr, alpha), scale_of(pr, beta));
  else
    conv_backward_filter<float>(pr, x, dy, dw, scale_of(pr, alpha), scale_of(pr, beta));
  return CUDNN_STATUS_SUCCESS;
}
