// The CUDA backend's DeviceHooks, registered at load time: core allocates and
// copies Device::cuda(i) memory through them.
#include <cstring>
#include <numeric>
#include <vector>

#include "core/allocator.h"
#include "runtime/cuda/caching_allocator.h"
#include "kernels/ops.h"
#include "tests/cuda/cuda_test_util.h"

TEST_CASE("device hooks: registered for CUDA at load time", "[cuda][hooks]") {
  REQUIRE(hg::has_device_hooks(hg::DeviceType::CUDA));
  hg::DeviceHooks& hooks = hg::device_hooks(hg::DeviceType::CUDA);
  CHECK(hooks.device_count() == hg::cuda::device_count());
  CHECK(&hooks.allocator() == &hg::cuda::cuda_allocator());
}

TEST_CASE("device hooks: host -> device -> device -> host round trip", "[cuda][hooks]") {
  HG_REQUIRE_CUDA_DEVICE();
  const hg::Device cuda = hg::Device::cuda(0), cpu = hg::Device::cpu();
  hg::DeviceHooks& hooks = hg::device_hooks(hg::DeviceType::CUDA);
  hg::Allocator& alloc = hooks.allocator();

  constexpr size_t kCount = 10007;  // odd size: no rounding hides a short copy
  std::vector<float> host(kCount), back(kCount, -1.0f);
  std::iota(host.begin(), host.end(), 0.5f);
  const size_t bytes = kCount * sizeof(float);

  const auto before = hg::cuda::memory_stats(0);
  void* d1 = alloc.allocate(bytes, cuda);
  void* d2 = alloc.allocate(bytes, cuda);
  CHECK(hg::cuda::memory_stats(0).active_blocks == before.active_blocks + 2);
  CHECK(alloc.allocate(0, cuda) == nullptr);

  hg::copy_bytes(d1, cuda, host.data(), cpu, bytes);
  hg::copy_bytes(d2, cuda, d1, cuda, bytes);
  hg::copy_bytes(back.data(), cpu, d2, cuda, bytes);
  CHECK(back == host);

  // On a non-default current stream the copies are ordered on that stream.
  hg::cuda::Stream stream = hg::cuda::Stream::create();
  {
    hg::cuda::StreamGuard guard(stream);
    std::vector<float> again(kCount, 0.0f);
    hooks.copy_bytes(again.data(), cpu, d1, cuda, bytes);
    CHECK(again == host);
  }
  hooks.synchronize(cuda);
  alloc.deallocate(d1, cuda);
  alloc.deallocate(d2, cuda);
  alloc.deallocate(nullptr, cuda);
  CHECK(hg::cuda::memory_stats(0).active_blocks == before.active_blocks);
}

// Note [Host sync counter]: waits and device-to-host copies are counted; a
// kernel launch and an in-stream-order upload are not.
TEST_CASE("host sync counter: counts copies to the host and waits, nothing else", "[cuda][hooks]") {
  HG_REQUIRE_CUDA_DEVICE();
  using hg::cuda::host_sync_counts;
  const hg::Device cuda = hg::Device::cuda(0);
  const hg::Tensor a = hg::ones({1000}, {.device = cuda});  // H2D: waits once for the stream

  auto before = host_sync_counts();
  const hg::Tensor b = hg::ops::binary(hg::OpId::add, hg::ops::binary(hg::OpId::mul, a, a), a);  // kernels only
  auto after = host_sync_counts();
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.synchronizations == before.synchronizations);

  before = host_sync_counts();
  CHECK(b.cpu().to_vector<float>()[999] == 2.0f);  // one D2H copy, which waits
  after = host_sync_counts();
  CHECK(after.device_to_host_copies - before.device_to_host_copies >= 1);
  CHECK(after.synchronizations - before.synchronizations >= 1);

  before = host_sync_counts();
  hg::cuda::current_stream().synchronize();
  hg::cuda::synchronize();
  hg::cuda::Event e;
  e.record();
  e.synchronize();
  after = host_sync_counts();
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.synchronizations - before.synchronizations == 3);
}
