// DLPack export and import (runtime/dlpack.h): zero copy (the same pointer),
// strides and offsets kept, every dtype, the deleter called exactly once in
// both lifetime orders (the asan preset runs these under ASan + LSan), a
// foreign producer written here by hand as the independent side, and the
// CUDA stream contract on kDLCUDA tensors (cuda-emu in the emu build).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/tensor.h"
#include "runtime/dlpack.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;

namespace {

// A producer that is not halfgrad: it owns a heap buffer and counts its
// deleter calls, so a test sees when (and how often) the consumer released it.
template <typename Managed>
struct ForeignProducer {
  std::vector<double> buffer;
  std::vector<int64_t> shape, strides;
  int* deleted;  // incremented by the deleter; outlives the producer

  static void deleter(Managed* self) {
    auto* p = static_cast<ForeignProducer*>(self->manager_ctx);
    ++*p->deleted;
    delete p;
    delete self;
  }

  // buffer = 0, 1, 2, ... (n values), viewed as `shape` with `strides` from element `first`.
  static Managed* make(int64_t n, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t first,
                       int* deleted) {
    auto* p = new ForeignProducer{{}, std::move(shape), std::move(strides), deleted};
    for (int64_t i = 0; i < n; ++i) p->buffer.push_back(static_cast<double>(i));
    auto* m = new Managed{};
    m->manager_ctx = p;
    m->deleter = &ForeignProducer::deleter;
    DLTensor& dl = m->dl_tensor;
    dl.data = p->buffer.data();
    dl.byte_offset = static_cast<uint64_t>(first) * sizeof(double);
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(p->shape.size());
    dl.dtype = {static_cast<uint8_t>(kDLFloat), 64, 1};
    dl.shape = p->shape.data();
    dl.strides = p->strides.empty() ? nullptr : p->strides.data();
    if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
      m->version = {1, 0};
      m->flags = 0;
    }
    return m;
  }
};

template <typename Managed>
Managed* export_as(const Tensor& t, const DLPackOptions& options = {}) {
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    return to_dlpack_versioned(t, options);
  } else {
    return to_dlpack(t, options);
  }
}

// A view with an offset and non-unit strides: arange(24) as [4, 6],
// transposed, then rows 1.. of it stepping 2 columns -> [5, 2] at offset 6.
Tensor strided_view(DType dtype, Device device = Device::cpu()) {
  return arange(24.0, {.dtype = dtype, .device = device}).view({4, 6}).t().slice(0, 1, 6).slice(1, 0, 4, 2);
}

}  // namespace

TEMPLATE_TEST_CASE("to_dlpack then from_dlpack: same pointer, strides and offset, every dtype", "[dlpack]",
                   DLManagedTensor, DLManagedTensorVersioned) {
  for (DType dtype : {kF32, kF64, kF16, kBF16, kI64, kI32, kU8}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = strided_view(dtype);
    REQUIRE(x.offset() == 1);
    TestType* m = export_as<TestType>(x);
    REQUIRE(m != nullptr);
    const DLTensor& dl = m->dl_tensor;
    CHECK(dl.data == x.data_ptr());  // the first element, byte_offset 0
    CHECK(dl.byte_offset == 0);
    CHECK(dl.ndim == 2);
    CHECK(std::vector<int64_t>(dl.shape, dl.shape + 2) == std::vector<int64_t>{5, 2});
    CHECK(std::vector<int64_t>(dl.strides, dl.strides + 2) == std::vector<int64_t>{1, 12});
    CHECK(dl.device.device_type == kDLCPU);
    CHECK(dl.dtype.lanes == 1);
    CHECK(dl.dtype.bits == dtype_size(dtype) * 8);
    if constexpr (std::is_same_v<TestType, DLManagedTensorVersioned>) {
      CHECK(m->version.major == 1);
      CHECK(m->flags == 0);
    }
    const Tensor y = from_dlpack(m);
    CHECK(y.data_ptr() == x.data_ptr());
    CHECK(y.sizes() == x.sizes());
    CHECK(y.strides() == x.strides());
    CHECK(y.dtype() == dtype);
    // Values by the index formula, not through another view: x[i][j] = 6 (2j) + (i + 1).
    const std::vector<double> got = y.to(kF64).to_vector<double>();
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < 2; ++j) CHECK(got[static_cast<size_t>(i * 2 + j)] == 12.0 * j + i + 1);
    }
  }
}

TEST_CASE("DLPack dtype codes: bf16 is kDLBfloat, bool is kDLBool, fp8 the 1.1 codes; others refused", "[dlpack]") {
  CHECK(to_dlpack_dtype(kBF16).code == kDLBfloat);
  CHECK(to_dlpack_dtype(kF8E4M3).code == 10);  // kDLFloat8_e4m3fn
  CHECK(to_dlpack_dtype(kF8E5M2).code == 12);  // kDLFloat8_e5m2
  CHECK(to_dlpack_dtype(kF8E5M2).bits == 8);
  CHECK(to_dlpack_dtype(kF16).code == kDLFloat);
  CHECK(to_dlpack_dtype(kBool).code == kDLPackBoolCode);
  CHECK(to_dlpack_dtype(kBool).bits == 8);
  CHECK(to_dlpack_dtype(kU8).code == kDLUInt);
  for (DType dtype : {kF32, kF64, kF16, kBF16, kF8E4M3, kF8E5M2, kI64, kI32, kU8, kBool}) {
    CHECK(dtype_from_dlpack(to_dlpack_dtype(dtype)) == dtype);
  }
  CHECK_THROWS_WITH(dtype_from_dlpack({static_cast<uint8_t>(kDLInt), 8, 1}), Catch::Contains("no halfgrad dtype"));
  CHECK_THROWS_WITH(dtype_from_dlpack({static_cast<uint8_t>(kDLFloat), 32, 4}), Catch::Contains("lanes 4"));
  CHECK_THROWS_WITH(dtype_from_dlpack({static_cast<uint8_t>(kDLComplex), 64, 1}), Catch::Contains("no halfgrad dtype"));

  const Tensor b = from_vector(std::vector<bool>{true, false, true});
  const Tensor back = from_dlpack(to_dlpack(b));
  CHECK(back.dtype() == kBool);
  CHECK(back.data_ptr() == b.data_ptr());
  CHECK(back.to_vector<bool>() == std::vector<bool>{true, false, true});

  // fp8 (values exact in both formats): the same pointer and bytes back.
  for (DType dtype : {kF8E4M3, kF8E5M2}) {
    const Tensor f = from_vector(std::vector<double>{0.5, -2, 3, 448 / 16.0}).to(dtype);
    const Tensor g = from_dlpack(to_dlpack(f));
    CHECK(g.dtype() == dtype);
    CHECK(g.data_ptr() == f.data_ptr());
    CHECK(g.to(kF64).to_vector<double>() == std::vector<double>{0.5, -2, 3, 28});
  }
}

TEMPLATE_TEST_CASE("DLPack lifetimes: the export outlives the tensor, and the import outlives the producer", "[dlpack]",
                   DLManagedTensor, DLManagedTensorVersioned) {
  SECTION("halfgrad tensor dropped first, then the consumer reads and releases") {
    TestType* m = nullptr;
    {
      Tensor x = arange(10.0).mul(scalar_tensor(2.0));
      m = export_as<TestType>(x);
    }  // the last halfgrad handle is gone; the export keeps the storage alive
    const auto* p = static_cast<const float*>(m->dl_tensor.data);
    CHECK(p[9] == 18.0f);  // ASan: a read after free if the export did not own the storage
    m->deleter(m);
  }
  SECTION("import from a foreign producer; the producer's own handle goes first") {
    int deleted = 0;
    Tensor y;
    {
      TestType* m = ForeignProducer<TestType>::make(12, {3, 2}, {4, 1}, 1, &deleted);
      y = from_dlpack(m);
    }
    CHECK(deleted == 0);
    CHECK(y.to_vector<double>() == std::vector<double>{1, 2, 5, 6, 9, 10});
    Tensor view = y.t();  // views share the import; the deleter waits for the last
    y = Tensor();
    CHECK(deleted == 0);
    CHECK(view.to_vector<double>() == std::vector<double>{1, 5, 9, 2, 6, 10});
    view = Tensor();
    CHECK(deleted == 1);
  }
  SECTION("writes through the import land in the producer's memory (zero copy)") {
    int deleted = 0;
    TestType* m = ForeignProducer<TestType>::make(6, {2, 3}, {}, 0, &deleted);  // null strides: row-major
    auto* producer = static_cast<ForeignProducer<TestType>*>(m->manager_ctx);
    Tensor y = from_dlpack(m);
    CHECK(y.strides() == Shape{3, 1});
    y.select(0, 1).fill_(-1.0);
    CHECK(producer->buffer == std::vector<double>{0, 1, 2, -1, -1, -1});
    y = Tensor();
    CHECK(deleted == 1);
  }
  SECTION("a round trip halfgrad -> DLPack -> halfgrad -> DLPack keeps one buffer") {
    Tensor x = arange(6.0);
    const void* p = x.data_ptr();
    Tensor y = from_dlpack(export_as<TestType>(x));
    x = Tensor();
    TestType* again = export_as<TestType>(y);
    y = Tensor();
    CHECK(again->dl_tensor.data == p);
    CHECK(static_cast<const float*>(again->dl_tensor.data)[5] == 5.0f);
    again->deleter(again);
  }
}

TEMPLATE_TEST_CASE("from_dlpack refuses bad tensors and still calls the deleter once", "[dlpack]", DLManagedTensor,
                   DLManagedTensorVersioned) {
  int deleted = 0;
  SECTION("unsupported dtype") {
    TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
    m->dl_tensor.dtype = {static_cast<uint8_t>(kDLInt), 16, 1};
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("no halfgrad dtype"));
  }
  SECTION("unsupported device") {
    TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
    m->dl_tensor.device = {kDLVulkan, 0};
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("device type 7"));
  }
  SECTION("negative stride") {
    TestType* m = ForeignProducer<TestType>::make(4, {4}, {-1}, 3, &deleted);
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("negative stride"));
  }
  SECTION("negative size") {
    TestType* m = ForeignProducer<TestType>::make(4, {-4}, {1}, 0, &deleted);
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("negative size"));
  }
  SECTION("null data with elements") {
    TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
    m->dl_tensor.data = nullptr;
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("data is null"));
  }
  SECTION("misaligned data") {
    TestType* m = ForeignProducer<TestType>::make(4, {2}, {1}, 0, &deleted);
    m->dl_tensor.byte_offset = 3;
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("not aligned"));
  }
  SECTION("ndim out of range") {
    TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
    m->dl_tensor.ndim = -1;
    CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("ndim -1"));
  }
  if constexpr (std::is_same_v<TestType, DLManagedTensorVersioned>) {
    SECTION("another major version: only the deleter is touched") {
      TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
      m->version = {2, 0};
      CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("DLPack version 2.0 is not supported"));
    }
    SECTION("read-only") {
      TestType* m = ForeignProducer<TestType>::make(4, {4}, {1}, 0, &deleted);
      m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
      CHECK_THROWS_WITH(from_dlpack(m), Catch::Contains("read-only"));
    }
  }
  CHECK(deleted == 1);
}

TEST_CASE("DLPack edge shapes: rank 0, empty, expanded (stride 0)", "[dlpack]") {
  const Tensor s = scalar_tensor(2.5);
  DLManagedTensor* m = to_dlpack(s);
  CHECK(m->dl_tensor.ndim == 0);
  const Tensor s2 = from_dlpack(m);
  CHECK(s2.dim() == 0);
  CHECK(s2.item<float>() == 2.5f);

  const Tensor e = zeros({0, 3});
  const Tensor e2 = from_dlpack(to_dlpack_versioned(e));
  CHECK(e2.sizes() == Shape{0, 3});
  CHECK(e2.numel() == 0);

  const Tensor row = arange(3.0);
  const Tensor wide = row.expand({4, 3});
  DLManagedTensor* w = to_dlpack(wide);
  CHECK(w->dl_tensor.strides[0] == 0);
  const Tensor wide2 = from_dlpack(w);
  CHECK(wide2.strides() == Shape{0, 1});
  CHECK(wide2.data_ptr() == row.data_ptr());
  CHECK(wide2.sum().item<float>() == 12.0f);
}

TEST_CASE("to_dlpack refuses what it cannot export", "[dlpack]") {
  CHECK_THROWS_WITH(to_dlpack(Tensor()), Catch::Contains("undefined"));
  const Tensor w = ones({2}, {.requires_grad = true});
  CHECK_THROWS_WITH(to_dlpack(w), Catch::Contains("detach()"));
  DLManagedTensor* m = to_dlpack(w.detach());
  m->deleter(m);
  CHECK_THROWS_WITH(to_dlpack(ones({2}), {.stream = 1}), Catch::Contains("CPU tensor takes no stream"));
  CHECK_THROWS_WITH(to_dlpack(ones({2}), {.read_only = true}), Catch::Contains("versioned"));
  DLManagedTensorVersioned* v = to_dlpack_versioned(ones({2}), {.read_only = true});
  CHECK(v->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_THROWS_WITH(from_dlpack(v), Catch::Contains("read-only"));  // and the deleter ran (LSan)
  CHECK(!dlpack_stream(Device::cpu()).has_value());
}

#if defined(HG_WITH_CUDA)
TEST_CASE("DLPack on CUDA: kDLCUDA device, same device pointer, stream contract", "[dlpack][cuda]") {
  REQUIRE(cuda::is_available());  // the test_interop_cuda CTest test runs this only where one is
  const Tensor x = strided_view(kF32, Device::cuda());
  DLManagedTensorVersioned* m = to_dlpack_versioned(x);
  CHECK(m->dl_tensor.device.device_type == kDLCUDA);
  CHECK(m->dl_tensor.device.device_id == 0);
  CHECK(m->dl_tensor.data == x.data_ptr());
  const Tensor y = from_dlpack(m);
  CHECK(y.device() == Device::cuda());
  CHECK(y.data_ptr() == x.data_ptr());
  CHECK(y.strides() == x.strides());
  CHECK(y.cpu().to_vector<float>() == std::vector<float>{1, 13, 2, 14, 3, 15, 4, 16, 5, 17});

  // The default stream is DLPack's legacy default (1); a created one is its handle.
  CHECK(dlpack_stream(Device::cuda()) == std::optional<int64_t>{1});
  const cuda::Stream side = cuda::Stream::create();
  {
    cuda::StreamGuard on_side(side);
    CHECK(dlpack_stream(Device::cuda()) ==
          std::optional<int64_t>{static_cast<int64_t>(reinterpret_cast<uintptr_t>(side.handle()))});
  }

  // Handing the tensor to a consumer on another stream queues a device-side
  // wait, never a host wait; every value the spec allows is accepted.
  const cuda::Stream consumer = cuda::Stream::create();
  const int64_t consumer_id = static_cast<int64_t>(reinterpret_cast<uintptr_t>(consumer.handle()));
  const cuda::HostSyncCounts before = cuda::host_sync_counts();
  for (std::optional<int64_t> s : {std::optional<int64_t>{}, std::optional<int64_t>{1}, std::optional<int64_t>{2},
                                   std::optional<int64_t>{-1}, std::optional<int64_t>{consumer_id}}) {
    DLManagedTensor* e = to_dlpack(x, {.stream = s});
    e->deleter(e);
  }
  {
    cuda::StreamGuard on_side(side);  // halfgrad working on a side stream
    DLManagedTensor* e = to_dlpack(x, {.stream = consumer_id});
    e->deleter(e);
  }
  const cuda::HostSyncCounts after = cuda::host_sync_counts();
  CHECK(after.synchronizations == before.synchronizations);
  CHECK(after.device_to_host_copies == before.device_to_host_copies);

  // 0 is ambiguous and refused, as is a stream the runtime does not know
  // (which shows the wait is really queued on the consumer's stream).
  CHECK_THROWS_WITH(to_dlpack(x, {.stream = 0}), Catch::Contains("ambiguous"));
  CHECK_THROWS_WITH(to_dlpack(x, {.stream = -7}), Catch::Contains("not a CUDA stream"));
  cudaStream_t gone = nullptr;
  REQUIRE(cudaStreamCreate(&gone) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(gone) == cudaSuccess);
  {
    cuda::StreamGuard on_side(side);
    CHECK_THROWS_WITH(to_dlpack(x, {.stream = static_cast<int64_t>(reinterpret_cast<uintptr_t>(gone))}),
                      Catch::Contains("cudaStreamWaitEvent"));
  }

  // A device index that does not exist is refused on import, and the deleter runs.
  DLManagedTensor* bad = to_dlpack(x);
  bad->dl_tensor.device.device_id = cuda::device_count() + 3;
  CHECK_THROWS(from_dlpack(bad));
}
#endif
