// The cuDNN convolution calls kernels/conv/conv.cu makes, called directly:
// output-dimension query, heuristics, workspace sizes, forward with alpha/beta
// blending, NHWC tensors with an NHWC filter, and the documented
// CUDNN_STATUS_BAD_PARAM for an output descriptor of the wrong shape. In the
// emu build this checks the CPU stand-ins (runtime/emu/runtime_cudnn.cpp)
// against a direct sum computed here; on a GPU the same checks hold for the
// real library. Tagged [cudnn]: its own CTest test, skipped without cuDNN.
#include <cudnn.h>

#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace {

// A small problem: x [1, 2, 4, 5], w [3, 2, 3, 2], pad (1, 0), stride (1, 2), dilation 1.
constexpr int N = 1, C = 2, H = 4, W = 5, K = 3, R = 3, S = 2, PH = 1, PW = 0, SH = 1, SW = 2;
constexpr int P = (H + 2 * PH - R) / SH + 1, Q = (W + 2 * PW - S) / SW + 1;

std::vector<float> iota_values(int n, float scale, float shift) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 11) * scale + shift;
  return v;
}

// y[k, p, q] = sum x[c, p*SH - PH + r, q*SW - PW + s] * w[k, c, r, s] (NCHW, KCRS).
std::vector<float> direct(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(K * P * Q, 0.0f);
  for (int k = 0; k < K; ++k)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        double acc = 0;
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s) {
              const int h = p * SH - PH + r, ww = q * SW - PW + s;
              if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
              acc += static_cast<double>(x[(c * H + h) * W + ww]) * w[((k * C + c) * R + r) * S + s];
            }
        y[(k * P + p) * Q + q] = static_cast<float>(acc);
      }
  return y;
}

}  // namespace

TEST_CASE("cuDNN convolution: output dims, heuristics, workspace, forward with blending", "[cuda][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  cudnnHandle_t handle = hg::cuda::cudnn_handle();
  cudnnTensorDescriptor_t xd, yd, bad;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  REQUIRE(cudnnCreateTensorDescriptor(&xd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateTensorDescriptor(&yd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateTensorDescriptor(&bad) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateFilterDescriptor(&wd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateConvolutionDescriptor(&cd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptorEx(xd, CUDNN_DATA_FLOAT, N, C, H, W, C * H * W, H * W, W, 1) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(cd, PH, PW, SH, SW, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS);
  int on = 0, oc = 0, oh = 0, ow = 0;
  REQUIRE(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow) == CUDNN_STATUS_SUCCESS);
  CHECK((on == N && oc == K && oh == P && ow == Q));
  REQUIRE(cudnnSetTensor4dDescriptorEx(yd, CUDNN_DATA_FLOAT, N, K, P, Q, K * P * Q, P * Q, Q, 1) ==
          CUDNN_STATUS_SUCCESS);

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                 perf) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 1);
  REQUIRE(perf[0].status == CUDNN_STATUS_SUCCESS);
  size_t bytes = 0;
  REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, perf[0].algo, &bytes) ==
          CUDNN_STATUS_SUCCESS);

  const auto xv = iota_values(N * C * H * W, 0.25f, -1.0f), wv = iota_values(K * C * R * S, 0.5f, -2.0f);
  const auto expected = direct(xv, wv);
  hg::test::DeviceBuffer x(xv.size() * 4), w(wv.size() * 4), y(expected.size() * 4), ws(bytes + 16);
  x.upload(xv);
  w.upload(wv);
  y.upload(std::vector<float>(expected.size(), 1.0f));
  const float one = 1.0f, zero = 0.0f, two = 2.0f;
  REQUIRE(cudnnConvolutionForward(handle, &one, xd, x.get(), wd, w.get(), cd, perf[0].algo, ws.get(), bytes, &zero, yd,
                                  y.get()) == CUDNN_STATUS_SUCCESS);
  HG_CUDA_CHECK(cudaDeviceSynchronize());
  auto got = y.download<float>(expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-5));
  // beta = 1, alpha = 2: y = 2 * conv + y.
  REQUIRE(cudnnConvolutionForward(handle, &two, xd, x.get(), wd, w.get(), cd, perf[0].algo, ws.get(), bytes, &one, yd,
                                  y.get()) == CUDNN_STATUS_SUCCESS);
  HG_CUDA_CHECK(cudaDeviceSynchronize());
  got = y.download<float>(expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(3 * expected[i]).margin(1e-5));

  // An output descriptor that is not the convolution's output shape.
  REQUIRE(cudnnSetTensor4dDescriptorEx(bad, CUDNN_DATA_FLOAT, N, K, P + 1, Q, K * (P + 1) * Q, (P + 1) * Q, Q, 1) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnConvolutionForward(handle, &one, xd, x.get(), wd, w.get(), cd, perf[0].algo, ws.get(), bytes, &zero, bad,
                                y.get()) == CUDNN_STATUS_BAD_PARAM);

  // The same problem in NHWC: channels-last x and y strides, a KRSC filter.
  std::vector<float> x_nhwc(xv.size()), w_krsc(wv.size());
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < H; ++h)
      for (int ww = 0; ww < W; ++ww) x_nhwc[(h * W + ww) * C + c] = xv[(c * H + h) * W + ww];
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) w_krsc[((k * R + r) * S + s) * C + c] = wv[((k * C + c) * R + r) * S + s];
  x.upload(x_nhwc);
  w.upload(w_krsc);
  REQUIRE(cudnnSetTensor4dDescriptorEx(xd, CUDNN_DATA_FLOAT, N, C, H, W, H * W * C, 1, W * C, C) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptorEx(yd, CUDNN_DATA_FLOAT, N, K, P, Q, P * Q * K, 1, Q * K, K) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, K, C, R, S) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                 perf) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 1);
  REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, perf[0].algo, &bytes) ==
          CUDNN_STATUS_SUCCESS);
  hg::test::DeviceBuffer ws2(bytes + 16);
  REQUIRE(cudnnConvolutionForward(handle, &one, xd, x.get(), wd, w.get(), cd, perf[0].algo, ws2.get(), bytes, &zero, yd,
                                  y.get()) == CUDNN_STATUS_SUCCESS);
  HG_CUDA_CHECK(cudaDeviceSynchronize());
  got = y.download<float>(expected.size());
  for (int k = 0; k < K; ++k)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) CHECK(got[(p * Q + q) * K + k] == Approx(expected[(k * P + p) * Q + q]).margin(1e-5));

  (void)cudnnDestroyConvolutionDescriptor(cd);
  (void)cudnnDestroyFilterDescriptor(wd);
  (void)cudnnDestroyTensorDescriptor(bad);
  (void)cudnnDestroyTensorDescriptor(yd);
  (void)cudnnDestroyTensorDescriptor(xd);
}

#if defined(HG_CUDA_EMU)
TEST_CASE("cuDNN stand-in: deterministic algorithms first, short workspaces and bad types refused", "[cuda][cudnn]") {
  cudnnHandle_t handle = hg::cuda::cudnn_handle();
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  REQUIRE(cudnnCreateTensorDescriptor(&xd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateTensorDescriptor(&yd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateFilterDescriptor(&wd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateConvolutionDescriptor(&cd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptorEx(xd, CUDNN_DATA_HALF, N, C, H, W, C * H * W, H * W, W, 1) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptorEx(yd, CUDNN_DATA_HALF, N, K, P, Q, K * P * Q, P * Q, Q, 1) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW, K, C, R, S) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(cd, PH, PW, SH, SW, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_SUCCESS);
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, xd, yd, cd, wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &count, perf) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count == 2);
  CHECK(perf[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(perf[1].determinism == CUDNN_NON_DETERMINISTIC);
  size_t bytes = 0;
  REQUIRE(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, yd, cd, wd, perf[0].algo, &bytes) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(bytes == static_cast<size_t>(C * R * S * P * Q) * 2);  // an im2col buffer of halves
  hg::test::DeviceBuffer x(1024), dy(1024), dw(1024), ws(bytes);
  const float one = 1.0f, zero = 0.0f;
  CHECK(cudnnConvolutionBackwardFilter(handle, &one, xd, x.get(), yd, dy.get(), cd, perf[0].algo, ws.get(), bytes - 1,
                                       &zero, wd, dw.get()) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnConvolutionBackwardFilter(handle, &one, xd, x.get(), yd, dy.get(), cd,
                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, ws.get(), bytes, &zero, wd,
                                       dw.get()) == CUDNN_STATUS_NOT_SUPPORTED);
  REQUIRE(cudnnSetConvolution2dDescriptor(cd, PH, PW, SH, SW, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_DOUBLE) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, yd, cd, wd, perf[0].algo, &bytes) ==
        CUDNN_STATUS_NOT_SUPPORTED);  // half data, double compute
  CHECK(cudnnSetConvolutionGroupCount(cd, 0) == CUDNN_STATUS_BAD_PARAM);
  (void)cudnnDestroyConvolutionDescriptor(cd);
  (void)cudnnDestroyFilterDescriptor(wd);
  (void)cudnnDestroyTensorDescriptor(yd);
  (void)cudnnDestroyTensorDescriptor(xd);
}
#endif
