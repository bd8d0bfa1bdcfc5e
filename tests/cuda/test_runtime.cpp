// The CUDA runtime layer: discovery, devices, streams, events, error checks,
// library handles. Runs on the emulator everywhere and on a GPU when present.
#include <chrono>
#include <string>
#include <thread>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include "core/allocator.h"
#include "core/error.h"
#include "tests/cuda/cuda_test_util.h"

#if defined(HG_CUDA_EMU)
#include <hg_emu_runtime.h>
#endif

using Catch::Matchers::Contains;

TEST_CASE("cuda runtime: device discovery", "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  REQUIRE(hg::cuda::device_count() >= 1);
  REQUIRE(hg::cuda::current_device() >= 0);
  const cudaDeviceProp& prop = hg::cuda::device_properties(0);
  CHECK(prop.warpSize == 32);
  CHECK(prop.major >= 7);
  CHECK(prop.maxThreadsPerBlock == 1024);
  CHECK(prop.multiProcessorCount > 0);
  CHECK(prop.sharedMemPerBlockOptin >= prop.sharedMemPerBlock);
  CHECK(prop.totalGlobalMem > 0);
  // Cached: the same object every time.
  CHECK(&hg::cuda::device_properties(0) == &prop);
#if defined(HG_CUDA_EMU)
  CHECK_THAT(std::string(prop.name), Contains("cuda-emu"));
  CHECK(prop.major == 9);
  CHECK(prop.minor == 0);
  int value = 0;
  REQUIRE(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) ==
          cudaSuccess);
  CHECK(value == 227 * 1024);
#endif
}

TEST_CASE("cuda runtime: a bad device index is a clear hg::Error", "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  const int count = hg::cuda::device_count();
  const std::string expected =
      "requested cuda:" + std::to_string(count + 2) + " but " + std::to_string(count) +
      " CUDA device(s) are available";
  CHECK_THROWS_WITH(hg::cuda::set_device(count + 2), Contains(expected));
  CHECK_THROWS_WITH(hg::cuda::DeviceGuard(count + 2), Contains(expected));
  CHECK_THROWS_WITH(hg::cuda::device_properties(count + 2), Contains(expected));
  CHECK_THROWS_AS(hg::cuda::set_device(-1), hg::Error);
  // Through core: Device::cuda(i) is checked by the registered hooks.
  CHECK_THROWS_WITH(hg::check_device(hg::Device::cuda(count + 2)), Contains(expected));
  CHECK_NOTHROW(hg::check_device(hg::Device::cuda(0)));
  // The failed calls leave no error behind for the next launch check.
  CHECK(cudaGetLastError() == cudaSuccess);
}

#if defined(HG_CUDA_EMU)
TEST_CASE("cuda runtime: no GPU means is_available() is false, not an exception",
          "[cuda][runtime]") {
  hg::emu::set_device_count(0);
  bool available = true;
  int count = -1;
  CHECK_NOTHROW(available = hg::cuda::is_available());
  CHECK_NOTHROW(count = hg::cuda::device_count());
  CHECK_FALSE(available);
  CHECK(count == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_THROWS_WITH(hg::check_device(hg::Device::cuda(0)),
                    Contains("0 CUDA device(s) are available"));
  CHECK_THROWS_WITH(hg::cuda::set_device(0), Contains("no driver or GPU found"));
  hg::emu::set_device_count(1);
  CHECK(hg::cuda::is_available());
}

TEST_CASE("cuda runtime: DeviceGuard switches and restores the device", "[cuda][runtime]") {
  hg::emu::set_device_count(2);
  REQUIRE(hg::cuda::current_device() == 0);
  {
    hg::cuda::DeviceGuard guard(1);
    CHECK(hg::cuda::current_device() == 1);
    CHECK(guard.original_device() == 0);
    {
      hg::cuda::DeviceGuard same(1);  // no switch, nothing to restore
      CHECK(same.original_device() == -1);
    }
    CHECK(hg::cuda::current_device() == 1);
    // Each device has its own current stream.
    hg::cuda::Stream s1 = hg::cuda::Stream::create(1);
    hg::cuda::StreamGuard on_s1(s1);
    CHECK(hg::cuda::current_stream(1) == s1);
    CHECK(hg::cuda::current_stream(0).is_default());
  }
  CHECK(hg::cuda::current_device() == 0);
  CHECK(hg::cuda::current_stream(1).is_default());
  hg::emu::set_device_count(1);
}
#endif

TEST_CASE("cuda runtime: streams, current stream and StreamGuard", "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  const hg::cuda::Stream default_stream = hg::cuda::current_stream();
  CHECK(default_stream.is_default());
  CHECK(default_stream == hg::cuda::Stream::default_stream());

  const auto [least, greatest] = hg::cuda::Stream::priority_range();
  CHECK(greatest <= least);
  hg::cuda::Stream high = hg::cuda::Stream::create(-1, greatest);
  hg::cuda::Stream low = hg::cuda::Stream::create();
  CHECK_FALSE(high.is_default());
  CHECK(high.priority() == greatest);
  CHECK(low.priority() == least);
  CHECK_FALSE(high == low);
  // Out-of-range priorities are clamped, as by the CUDA runtime.
  CHECK(hg::cuda::Stream::create(-1, greatest - 100).priority() == greatest);
  {
    hg::cuda::StreamGuard guard(high);
    CHECK(hg::cuda::current_stream() == high);
    {
      hg::cuda::StreamGuard inner(low);
      CHECK(hg::cuda::current_stream() == low);
    }
    CHECK(hg::cuda::current_stream() == high);
  }
  CHECK(hg::cuda::current_stream() == default_stream);
  high.synchronize();
  CHECK(high.query());
  CHECK_NOTHROW(hg::cuda::synchronize());

  // A copy of a created stream keeps it alive after the original is gone.
  hg::cuda::Stream copy;
  { copy = hg::cuda::Stream::create(); }
  CHECK_NOTHROW(copy.synchronize());

  // The current stream is per thread.
  hg::cuda::StreamGuard guard(low);
  bool other_thread_sees_default = false;
  std::thread worker([&] { other_thread_sees_default = hg::cuda::current_stream().is_default(); });
  worker.join();
  CHECK(other_thread_sees_default);
}

TEST_CASE("cuda runtime: events record, synchronize and time", "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  hg::cuda::Stream stream = hg::cuda::Stream::create();
  hg::cuda::Event start, stop;
  CHECK_FALSE(start.is_recorded());
  CHECK(start.query());           // never recorded counts as done
  CHECK_NOTHROW(start.synchronize());
  CHECK_THROWS_WITH(start.elapsed_ms(stop), Contains("record() on each first"));

  start.record(stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop.record(stream);
  stop.synchronize();
  CHECK(stop.query());
  const float ms = start.elapsed_ms(stop);
  CHECK(ms >= 15.0f);
  CHECK(ms < 5000.0f);

  stream.wait(stop);  // orders later work on `stream` after `stop`
  hg::cuda::Stream other = hg::cuda::Stream::create();
  other.wait(stop);
  other.wait(hg::cuda::Event());  // unrecorded: no-op

  hg::cuda::Event untimed(/*enable_timing=*/false);
  untimed.record();
  CHECK_THROWS_WITH(start.elapsed_ms(untimed), Contains("enable_timing"));

  // Move keeps the recorded event.
  hg::cuda::Event moved = std::move(stop);
  CHECK(moved.is_recorded());
  CHECK_FALSE(stop.is_recorded());  // NOLINT(bugprone-use-after-move): moved-from is empty
  CHECK(start.elapsed_ms(moved) >= 15.0f);
}

TEST_CASE("cuda runtime: HG_CUDA_CHECK names the call, the error and the place",
          "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  try {
    HG_CUDA_CHECK(cudaSetDevice(99));
    FAIL("HG_CUDA_CHECK did not throw");
  } catch (const hg::Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("cudaErrorInvalidDevice"));
    CHECK_THAT(what, Contains("invalid device ordinal"));
    CHECK_THAT(what, Contains("cudaSetDevice(99)"));
    CHECK_THAT(std::string(e.file()), Contains("test_runtime.cpp"));
    CHECK(e.line() > 0);
  }
  // The error was consumed: the next launch check is clean.
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_NOTHROW([] { HG_CUDA_CHECK_LAST_ERROR(); }());
}

TEST_CASE("cuda runtime: cuBLAS errors become hg::Error", "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  // cuBLAS documents CUBLAS_STATUS_INVALID_VALUE for cublasGemmEx with m < 0
  // (cuBLAS API reference, cublasGemmEx, "Return Value").
  const float one = 1.0f, zero = 0.0f;
  // The macros are statements; the lambdas make them expressions for Catch.
  CHECK_THROWS_WITH([&] {
    HG_CUBLAS_CHECK(cublasGemmEx(hg::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1,
                                 &one, nullptr, CUDA_R_32F, 1, nullptr, CUDA_R_32F, 1, &zero,
                                 nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }(),
                    Contains("CUBLAS_STATUS_INVALID_VALUE") && Contains("cublasGemmEx"));
}

TEST_CASE("cuda runtime: cuDNN errors become hg::Error", "[cuda][runtime][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  // cudnnSetStream documents CUDNN_STATUS_BAD_PARAM for a NULL handle.
  CHECK_THROWS_WITH([] { HG_CUDNN_CHECK(cudnnSetStream(nullptr, nullptr)); }(),
                    Contains("cuDNN error"));
}

TEST_CASE("cuda runtime: the cuDNN handle follows the current stream",
          "[cuda][runtime][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  CHECK(cudnnGetVersion() >= 9000);
  hg::cuda::Stream stream = hg::cuda::Stream::create();
  cudaStream_t bound = reinterpret_cast<cudaStream_t>(0x1234);
  {
    hg::cuda::StreamGuard guard(stream);
    cudnnHandle_t dnn = hg::cuda::cudnn_handle();
    REQUIRE(dnn != nullptr);
    REQUIRE(cudnnGetStream(dnn, &bound) == CUDNN_STATUS_SUCCESS);
    CHECK(bound == stream.handle());
  }
  REQUIRE(cudnnGetStream(hg::cuda::cudnn_handle(), &bound) == CUDNN_STATUS_SUCCESS);
  CHECK(bound == nullptr);
}

TEST_CASE("cuda runtime: library handles are per device and follow the current stream",
          "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  cublasHandle_t blas = hg::cuda::cublas_handle();
  REQUIRE(blas != nullptr);
  CHECK(hg::cuda::cublas_handle() == blas);
  cudaStream_t bound = reinterpret_cast<cudaStream_t>(0x1234);
  REQUIRE(cublasGetStream(blas, &bound) == CUBLAS_STATUS_SUCCESS);
  CHECK(bound == hg::cuda::current_stream().handle());

  hg::cuda::Stream stream = hg::cuda::Stream::create();
  {
    hg::cuda::StreamGuard guard(stream);
    CHECK(hg::cuda::cublas_handle() == blas);
    REQUIRE(cublasGetStream(blas, &bound) == CUBLAS_STATUS_SUCCESS);
    CHECK(bound == stream.handle());
  }
  hg::cuda::cublas_handle();  // rebinds to the default stream
  REQUIRE(cublasGetStream(blas, &bound) == CUBLAS_STATUS_SUCCESS);
  CHECK(bound == nullptr);

  cublasLtHandle_t lt = hg::cuda::cublaslt_handle();
  CHECK(lt != nullptr);
  CHECK(hg::cuda::cublaslt_handle() == lt);
  int version = 0;
  REQUIRE(cublasGetVersion(blas, &version) == CUBLAS_STATUS_SUCCESS);
  CHECK(version >= 120000);

  // Another thread gets its own handle.
  cublasHandle_t other = nullptr;
  std::thread worker([&] { other = hg::cuda::cublas_handle(); });
  worker.join();
  CHECK(other != nullptr);
  CHECK(other != blas);
}

TEST_CASE("cuda runtime: the cuBLAS handle forbids reduced-precision split-K reductions",
          "[cuda][runtime]") {
  HG_REQUIRE_CUDA_DEVICE();
  // 16-bit GEMMs promise fp32 accumulation and one rounding: cuBLAS may
  // otherwise reduce split-K partials in the 16-bit output type.
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  REQUIRE(cublasGetMathMode(hg::cuda::cublas_handle(), &mode) == CUBLAS_STATUS_SUCCESS);
  CHECK((static_cast<int>(mode) & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) != 0);
  CHECK((static_cast<int>(mode) & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) == CUBLAS_DEFAULT_MATH);
}

TEST_CASE("cuda runtime: the device count is cached and follows the emulator's setting",
          "[cuda][runtime]") {
  const int count = hg::cuda::device_count();
  CHECK(hg::cuda::device_count() == count);
#if defined(HG_CUDA_EMU)
  hg::emu::set_device_count(3);
  CHECK(hg::cuda::device_count() == 3);
  hg::emu::set_device_count(count);
  CHECK(hg::cuda::device_count() == count);
#endif
}
