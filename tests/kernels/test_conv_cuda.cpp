// conv2d, pooling and batch_norm on CUDA against the CPU backend: every dtype
// (f32, f16, bf16, f64), both layouts (NCHW and channels-last) and every option
// (stride, padding incl. asymmetric "same", dilation, groups, depthwise, bias;
// pooling windows with padding, dilation, ceil_mode, count_include_pad;
// BatchNorm training with running statistics, eval, 16-bit x with f32
// parameters). conv2d runs through cuDNN (kernels/conv/conv.cu) or, in the emu
// build, its CPU stand-ins (runtime/emu/runtime_cudnn.cpp, a direct sum: an
// implementation independent of the CPU backend's im2col + GEMM); pooling and
// BatchNorm through kernels/conv/pool_norm.cu. Both sides accumulate in fp32
// (f64 for f64) and round once, so they agree to the per-dtype
// OpKind::kReduction row of tests/kernels/tolerance.h (max pooling: exactly).
#include <catch2/catch.hpp>

#if defined(HG_WITH_CUDA)

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "kernels/conv/conv.h"
#include "runtime/cuda/runtime.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

const Device kCuda = Device::cuda(0);
Tensor channels_last(const Tensor& t);
const std::vector<DType> kDtypes{kF32, kF16, kBF16, kF64};

Tensor input(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return (rand(shape, {.dtype = kF64}, &gen) * 2.0 - 1.0).to(dtype);
}

Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

// t on cuda:0 in t's layout (Tensor::to(device) makes a contiguous copy).
Tensor cu(const Tensor& t) {
  if (!t.defined()) return t;
  return is_channels_last(t) ? channels_last(t.to(kCuda)) : t.to(kCuda);
}

// The CUDA result against the CPU result of the same op.
std::string same(const Tensor& cuda, const Tensor& cpu, DType dtype) {
  REQUIRE(cuda.defined());
  REQUIRE(cpu.defined());
  REQUIRE(cuda.sizes() == cpu.sizes());
  return compare_values(values_of(cuda.to(Device::cpu()).contiguous()), values_of(cpu.contiguous()),
                        tolerance_for(dtype, OpKind::kReduction));
}

struct Case {
  std::string name;
  Shape x, w;
  Conv2dParams p;
  bool bias = true;
};

std::vector<Case> cases() {
  return {
      {"plain 3x3", {2, 3, 7, 6}, {4, 3, 3, 3}, {}},
      {"stride 2 pad 1", {2, 3, 8, 7}, {5, 3, 3, 3}, {.stride = {2, 2}, .pad_lo = {1, 1}, .pad_hi = {1, 1}}},
      {"stride (1,3) pad (0,2), 1x2",
       {1, 2, 6, 9},
       {3, 2, 1, 2},
       {.stride = {1, 3}, .pad_lo = {0, 2}, .pad_hi = {0, 2}}},
      {"dilation (2,3)", {2, 2, 9, 8}, {3, 2, 3, 2}, {.pad_lo = {2, 1}, .pad_hi = {2, 1}, .dilation = {2, 3}}},
      {"groups 2", {2, 4, 6, 6}, {6, 2, 3, 3}, {.pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 2}},
      {"depthwise", {2, 3, 5, 6}, {6, 1, 3, 3}, {.stride = {2, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 3}},
      // padding "same" with an even dilated kernel: pad (1,1) before, (2,1) after
      {"asymmetric (same, 4x2 kernel)",
       {1, 2, 6, 5},
       {2, 2, 4, 2},
       {.pad_lo = {1, 1}, .pad_hi = {2, 1}, .dilation = {1, 2}}},
      {"no bias", {2, 3, 5, 5}, {2, 3, 2, 2}, {.stride = {2, 2}}, false},
  };
}

}  // namespace

TEST_CASE("conv2d on CUDA (cuDNN) matches the CPU: forward and all gradients", "[kernels][conv][cuda]") {
  for (const Case& c : cases()) {
    for (DType dt : kDtypes) {
      for (bool cl : {false, true}) {
        INFO(c.name << " " << dtype_name(dt) << (cl ? " channels-last" : " NCHW"));
        Tensor x = input(c.x, dt, 1), w = input(c.w, dt, 2);
        Tensor b = c.bias ? input({c.w[0]}, dt, 3) : Tensor();
        if (cl) x = channels_last(x);
        const Tensor y_cpu = ops::conv2d(x, w, b, c.p);
        const Tensor y = ops::conv2d(cu(x), cu(w), cu(b), c.p);
        CHECK(y.device() == kCuda);
        if (cl && c.w[0] > 1) CHECK(is_channels_last(y));
        CHECK(same(y, y_cpu, dt) == "");

        Tensor d_y = input(y_cpu.sizes(), dt, 4);
        if (cl) d_y = channels_last(d_y);
        auto [dx_cpu, dw_cpu, db_cpu] = ops::conv2d_backward(d_y, x, w, c.p, {true, true, c.bias});
        auto [d_x, d_w, d_b] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), c.p, {true, true, c.bias});
        if (cl) CHECK(is_channels_last(d_x));
        CHECK(same(d_x, dx_cpu, dt) == "");
        CHECK(same(d_w, dw_cpu, dt) == "");
        if (c.bias) CHECK(same(d_b, db_cpu, dt) == "");
      }
    }
  }
}

TEST_CASE("conv2d on CUDA: a d_y in the other layout and only some gradients", "[kernels][conv][cuda]") {
  const Case c = cases()[4];  // groups 2
  Tensor x = channels_last(input(c.x, kF32, 5)), w = input(c.w, kF32, 6);
  Tensor d_y = input({2, 6, 6, 6}, kF32, 7);  // NCHW d_y for a channels-last x
  auto [dx_cpu, dw_cpu, db_cpu] = ops::conv2d_backward(d_y, x, w, c.p, {true, true, true});
  auto [d_x, d_w, d_b] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), c.p, {false, true, false});
  CHECK_FALSE(d_x.defined());
  CHECK_FALSE(d_b.defined());
  CHECK(same(d_w, dw_cpu, kF32) == "");
  auto [dx2, dw2, db2] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), c.p, {true, false, true});
  CHECK(same(dx2, dx_cpu, kF32) == "");
  CHECK(same(db2, db_cpu, kF32) == "");
  // The autograd op end to end: conv2d + sum, gradients on the device.
  Tensor xg = cu(x).requires_grad_(true), wg = cu(w).requires_grad_(true);
  hg::sum(hg::conv2d(xg, wg, Tensor(), {.padding = {1, 1}, .groups = 2})).backward();
  auto [rdx, rdw, rdb] = ops::conv2d_backward(ones({2, 6, 6, 6}), x, w, c.p, {true, true, false});
  CHECK(same(xg.grad(), rdx, kF32) == "");
  CHECK(same(wg.grad(), rdw, kF32) == "");
}

// Whether cuDNN's heuristics list a deterministic backward-data / backward-
// filter algorithm for the f32 problem (x channels-last, w [O, 1, kh, kw]
// channels-last), asked directly as kernels/conv/conv.cu asks.
std::pair<bool, bool> deterministic_backward_listed(const Tensor& x, const Tensor& w, const Tensor& y,
                                                    const Conv2dParams& p) {
  auto tensor = [](const Tensor& t) {
    cudnnTensorDescriptor_t d = nullptr;
    REQUIRE(cudnnCreateTensorDescriptor(&d) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, static_cast<int>(t.size(0)), static_cast<int>(t.size(1)),
                                         static_cast<int>(t.size(2)), static_cast<int>(t.size(3)),
                                         static_cast<int>(t.stride(0)), static_cast<int>(t.stride(1)),
                                         static_cast<int>(t.stride(2)),
                                         static_cast<int>(t.stride(3))) == CUDNN_STATUS_SUCCESS);
    return d;
  };
  cudnnTensorDescriptor_t xd = tensor(x), yd = tensor(y);
  cudnnFilterDescriptor_t wd = nullptr;
  REQUIRE(cudnnCreateFilterDescriptor(&wd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, static_cast<int>(w.size(0)),
                                     static_cast<int>(w.size(1)), static_cast<int>(w.size(2)),
                                     static_cast<int>(w.size(3))) == CUDNN_STATUS_SUCCESS);
  cudnnConvolutionDescriptor_t cd = nullptr;
  REQUIRE(cudnnCreateConvolutionDescriptor(&cd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(cd, static_cast<int>(p.pad_lo[0]), static_cast<int>(p.pad_lo[1]),
                                          static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1]),
                                          static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolutionGroupCount(cd, static_cast<int>(p.groups)) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS);
  cudnnHandle_t handle = cuda::cudnn_handle();
  cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int nd = 0, nf = 0;
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, wd, yd, cd, xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                      &nd, data) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, xd, yd, cd, wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &nf, filter) == CUDNN_STATUS_SUCCESS);
  auto listed = [](const auto* perf, int n) {
    for (int i = 0; i < n; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) return true;
    return false;
  };
  const std::pair<bool, bool> r{listed(data, nd), listed(filter, nf)};
  (void)cudnnDestroyConvolutionDescriptor(cd);
  (void)cudnnDestroyFilterDescriptor(wd);
  (void)cudnnDestroyTensorDescriptor(xd);
  (void)cudnnDestroyTensorDescriptor(yd);
  return r;
}

TEST_CASE(
    "conv2d on CUDA: depthwise f32 channels-last, where cuDNN has no deterministic backward algorithm, "
    "falls back to NCHW: matches the CPU, channels-last outputs, bit-identical reruns",
    "[kernels][conv][cuda]") {
  const Conv2dParams p{.stride = {1, 2}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 4};
  const Tensor x = channels_last(input({2, 4, 7, 6}, kF32, 41)), w = input({4, 1, 3, 3}, kF32, 42);
  const Tensor y_cpu = ops::conv2d(x, w, Tensor(), p);
  const Tensor d_y = channels_last(input(y_cpu.sizes(), kF32, 43));
  const auto [data_listed, filter_listed] = deterministic_backward_listed(cu(x), channels_last(cu(w)), cu(d_y), p);
  INFO("deterministic algorithm listed: backward-data " << data_listed << ", backward-filter " << filter_listed);
#if defined(HG_CUDA_EMU)
  // The stand-in refuses as real cuDNN 9 does, so this case runs the fallback.
  REQUIRE_FALSE(data_listed);
  REQUIRE_FALSE(filter_listed);
#endif
  CHECK(same(ops::conv2d(cu(x), cu(w), Tensor(), p), y_cpu, kF32) == "");
  auto [dx_cpu, dw_cpu, db_cpu] = ops::conv2d_backward(d_y, x, w, p, {true, true, true});
  auto [d_x, d_w, d_b] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), p, {true, true, true});
  CHECK(is_channels_last(d_x));
  CHECK(same(d_x, dx_cpu, kF32) == "");
  CHECK(same(d_w, dw_cpu, kF32) == "");
  CHECK(same(d_b, db_cpu, kF32) == "");
  auto [dx2, dw2, db2] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), p, {true, true, true});
  CHECK(values_of(d_x.to(Device::cpu())) == values_of(dx2.to(Device::cpu())));
  CHECK(values_of(d_w.to(Device::cpu())) == values_of(dw2.to(Device::cpu())));
  // Only one gradient: each pass falls back on its own.
  auto [dx3, dw3, db3] = ops::conv2d_backward(cu(d_y), cu(x), cu(w), p, {false, true, false});
  CHECK_FALSE(dx3.defined());
  CHECK(values_of(dw3.to(Device::cpu())) == values_of(d_w.to(Device::cpu())));
  // Through autograd, as training meets it.
  Tensor xg = cu(x).requires_grad_(true), wg = cu(w).requires_grad_(true);
  hg::sum(hg::conv2d(xg, wg, Tensor(), {.stride = {1, 2}, .padding = {1, 1}, .groups = 4})).backward();
  auto [rdx, rdw, rdb] = ops::conv2d_backward(ones(y_cpu.sizes()), x, w, p, {true, true, false});
  CHECK(same(xg.grad(), rdx, kF32) == "");
  CHECK(same(wg.grad(), rdw, kF32) == "");
}

TEST_CASE("pooling on CUDA matches the CPU: max (exact, same indices), avg, adaptive", "[kernels][pool][cuda]") {
  const std::vector<Pool2dParams> windows{
      {.kernel = {2, 2}, .stride = {2, 2}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
      {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}, .ceil_mode = true},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false},
      {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}},  // overlapping windows: gradients add up
  };
  for (DType dt : kDtypes) {
    for (bool cl : {false, true}) {
      Tensor x = input({2, 3, 7, 8}, dt, 11);
      if (cl) x = channels_last(x);
      const Tensor xc = cu(x);
      for (size_t k = 0; k < windows.size() + 1; ++k) {
        Pool2dParams p =
            k < windows.size()
                ? windows[k]
                : Pool2dParams{
                      .kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 2}, .ceil_mode = true};
        INFO("window " << k << " " << dtype_name(dt) << (cl ? " NHWC" : " NCHW"));
        auto [y_cpu, i_cpu] = ops::max_pool2d(x, p);
        auto [y, idx] = ops::max_pool2d(xc, p);
        if (cl) CHECK(is_channels_last(y));
        CHECK(values_of(y.to(Device::cpu()).contiguous()) == values_of(y_cpu.contiguous()));
        CHECK(idx.to(Device::cpu()).contiguous().to_vector<int64_t>() == i_cpu.contiguous().to_vector<int64_t>());
        Tensor d_y = input(y_cpu.sizes(), dt, 12);
        CHECK(same(ops::max_pool2d_backward(cu(d_y), xc, idx, p), ops::max_pool2d_backward(d_y, x, i_cpu, p), dt) ==
              "");
        if (p.dilation[0] != 1) continue;  // avg_pool2d has no dilation
        CHECK(same(ops::avg_pool2d(xc, p), ops::avg_pool2d(x, p), dt) == "");
        CHECK(same(ops::avg_pool2d_backward(cu(d_y), xc, p), ops::avg_pool2d_backward(d_y, x, p), dt) == "");
      }
      for (std::array<int64_t, 2> out : {std::array<int64_t, 2>{1, 1}, {3, 5}, {7, 8}, {4, 3}}) {
        INFO("adaptive " << out[0] << "x" << out[1] << " " << dtype_name(dt) << (cl ? " NHWC" : " NCHW"));
        CHECK(same(ops::adaptive_avg_pool2d(xc, out), ops::adaptive_avg_pool2d(x, out), dt) == "");
        Tensor d_y = input({2, 3, out[0], out[1]}, dt, 13);
        CHECK(same(ops::adaptive_avg_pool2d_backward(cu(d_y), xc), ops::adaptive_avg_pool2d_backward(d_y, x), dt) ==
              "");
      }
    }
  }
}

TEST_CASE("batch_norm on CUDA matches the CPU: training, running stats, eval, backward", "[kernels][batchnorm][cuda]") {
  for (DType dt : kDtypes) {
    const DType pdt = dt == kF64 ? kF64 : kF32;  // 16-bit x with f32 parameters (the autocast contract)
    for (bool cl : {false, true}) {
      for (bool affine : {true, false}) {
        INFO(dtype_name(dt) << (cl ? " NHWC" : " NCHW") << (affine ? " affine" : ""));
        Tensor x = input({3, 4, 5, 6}, dt, 21) * 2.0 + 0.5;
        x = x.to(dt);
        if (cl) x = channels_last(x);
        const Tensor w = affine ? input({4}, pdt, 22) + 1.0 : Tensor(), b = affine ? input({4}, pdt, 23) : Tensor();
        const Tensor rm_cpu = input({4}, pdt, 24), rv_cpu = input({4}, pdt, 25) + 2.0;
        const Tensor rm = cu(rm_cpu), rv = cu(rv_cpu);
        const Tensor wc = affine ? cu(w) : Tensor(), bc = affine ? cu(b) : Tensor();
        const Tensor d_y = input(x.sizes(), dt, 26);
        for (bool training : {true, false}) {
          INFO((training ? "training" : "eval"));
          auto r_cpu = ops::batch_norm(x, w, b, rm_cpu, rv_cpu, training, 0.1, 1e-5);
          auto r = ops::batch_norm(cu(x), wc, bc, rm, rv, training, 0.1, 1e-5);
          if (cl) CHECK(is_channels_last(r.y));
          CHECK(same(r.y, r_cpu.y, dt) == "");
          CHECK(same(r.save_mean, r_cpu.save_mean, pdt) == "");
          CHECK(same(r.save_rstd, r_cpu.save_rstd, pdt) == "");
          CHECK(same(rm, rm_cpu, pdt) == "");
          CHECK(same(rv, rv_cpu, pdt) == "");
          auto [dx_cpu, dw_cpu, db_cpu] =
              ops::batch_norm_backward(d_y, x, w, r_cpu.save_mean, r_cpu.save_rstd, training, {true, true, true});
          auto [d_x, d_w, d_b] =
              ops::batch_norm_backward(cu(d_y), cu(x), wc, r.save_mean, r.save_rstd, training, {true, true, true});
          CHECK(same(d_x, dx_cpu, dt) == "");
          CHECK(same(d_w, dw_cpu, pdt) == "");
          CHECK(same(d_b, db_cpu, pdt) == "");
        }
      }
    }
  }
}

TEST_CASE("batch_norm on CUDA is deterministic (no atomics): two runs are bit-identical",
          "[kernels][batchnorm][cuda]") {
  const Tensor x = input({8, 3, 9, 7}, kF32, 31).to(kCuda), d_y = input({8, 3, 9, 7}, kF32, 32).to(kCuda);
  const Tensor w = ones({3}).to(kCuda);
  auto a = ops::batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto b = ops::batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  CHECK(values_of(a.y.to(Device::cpu())) == values_of(b.y.to(Device::cpu())));
  auto ga = ops::batch_norm_backward(d_y, x, w, a.save_mean, a.save_rstd, true, {true, true, true});
  auto gb = ops::batch_norm_backward(d_y, x, w, b.save_mean, b.save_rstd, true, {true, true, true});
  CHECK(values_of(std::get<0>(ga).to(Device::cpu())) == values_of(std::get<0>(gb).to(Device::cpu())));
  CHECK(values_of(std::get<1>(ga).to(Device::cpu())) == values_of(std::get<1>(gb).to(Device::cpu())));
}

#endif  // HG_WITH_CUDA
