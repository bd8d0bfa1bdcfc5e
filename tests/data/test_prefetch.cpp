// data/: the CUDA prefetcher of the DataLoader (Note [DataLoader prefetch]).
// On cuda-emu and real GPUs: prefetched batches are bit-equal to the
// synchronous CPU ones, resuming/breaking/skipping behave as without
// prefetching, errors of the worker reach the consumer, and destruction in the
// middle of a pass is clean.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/prefetch.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/runtime.h"
#endif
#include "tests/skip.h"

using namespace hg;
using namespace hg::data;

#if defined(HG_WITH_CUDA)

namespace {

bool have_cuda() { return cuda::is_available(); }

// n samples of shape [4, 5]; pixels vary per sample, label i.
struct Data {
  Tensor images;
  Tensor labels;
};
Data make_data(int64_t n) {
  std::vector<uint8_t> pixels(static_cast<size_t>(n) * 20);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::iota(labels.begin(), labels.end(), 0);
  return {from_vector(pixels, {n, 4, 5}), from_vector(labels, {n})};
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor host = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(host.data_ptr());
  return {p, p + host.nbytes()};
}

// What the loop body sees for one batch.
struct Seen {
  uint64_t epoch = 0;
  int64_t position = 0;
  Shape x_shape;
  DType x_dtype = kF32;
  std::vector<unsigned char> x;
  std::vector<unsigned char> y;
  bool operator==(const Seen&) const = default;
};

Seen seen(const DataLoader& loader, const Tensor& x, const Tensor& y) {
  return {loader.epoch(), loader.position(), x.sizes(), x.dtype(), bytes_of(x), bytes_of(y)};
}

// Up to `max_batches` batches of the current pass (all when negative).
std::vector<Seen> pass(DataLoader& loader, int64_t max_batches = -1) {
  std::vector<Seen> out;
  for (auto [x, y] : loader) {
    // The consumer's stream is ordered after the copy; a host read through
    // .cpu() syncs that stream, and the device tensors live on the loader's device.
    CHECK(x.device() == loader.options().device);
    CHECK(y.device() == loader.options().device);
    out.push_back(seen(loader, x, y));
    if (max_batches >= 0 && static_cast<int64_t>(out.size()) == max_batches) break;
  }
  return out;
}

std::vector<Seen> epochs(DataLoader& loader, int n) {
  std::vector<Seen> out;
  for (int e = 0; e < n; ++e) {
    const auto p = pass(loader);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

DataLoaderOptions on(Device device, DataLoaderOptions options, bool prefetch = true) {
  options.device = device;
  options.prefetch = prefetch;
  return options;
}

// Resets the worker's fault hook even when a check fails.
struct FaultGuard {
  explicit FaultGuard(int64_t index) { data::detail::set_prefetch_fault_for_testing(index); }
  ~FaultGuard() { data::detail::set_prefetch_fault_for_testing(-1); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
};

}  // namespace

TEST_CASE("prefetched CUDA batches equal the synchronous CPU batches", "[data][prefetch][cuda][needs-cuda]") {
  if (!have_cuda()) HG_SKIP("no CUDA device");
  const Data d = make_data(103);
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      for (int64_t limit : {int64_t{0}, int64_t{37}}) {
        for (DType dtype : {kF32, kF16}) {
          for (int64_t batch_size : {int64_t{8}, int64_t{64}}) {
            const DataLoaderOptions options{.batch_size = batch_size, .shuffle = shuffle,
                                            .seed = 3, .drop_last = drop_last, .mean = 0.25,
                                            .std = 0.5, .limit = limit, .dtype = dtype};
            INFO("shuffle " << shuffle << " drop_last " << drop_last << " limit " << limit
                            << " " << dtype_name(dtype) << " batch " << batch_size);
            DataLoader cpu(d.images, d.labels, options);
            DataLoader pre(d.images, d.labels, on(Device::cuda(), options));
            DataLoader sync(d.images, d.labels, on(Device::cuda(), options, false));
            const auto expected = epochs(cpu, 3);
            REQUIRE(expected.size() == static_cast<size_t>(3 * cpu.num_batches()));
            CHECK(epochs(pre, 3) == expected);
            CHECK(epochs(sync, 3) == expected);
            CHECK(pre.epoch() == 3);
            CHECK(pre.position() == 0);

            // One miss per pass (its first batch); every other batch was staged.
            // (limit 37, batch 64, drop_last: no batch at all.)
            const PrefetchStats stats = pre.prefetch_stats();
            const int64_t passes = pre.num_batches() > 0 ? 3 : 0;
            CHECK(stats.misses == passes);
            CHECK(stats.hits == passes * (pre.num_batches() - 1));
            CHECK(stats.staged == stats.hits);
            CHECK(stats.discarded == 0);
            CHECK(sync.prefetch_stats().misses == 0);  // prefetch off: the old path
            CHECK(cpu.prefetch_stats().copy_stream == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("prefetch copies on a side stream, ordered before the current stream", "[data][prefetch][cuda][needs-cuda]") {
  if (!have_cuda()) HG_SKIP("no CUDA device");
  const Data d = make_data(50);
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 1};
  DataLoader cpu(d.images, d.labels, options);
  const auto expected = pass(cpu);

  // On the default stream and on a user stream: the copies go to the loader's
  // own stream, never the consumer's, and values read after a sync of the
  // consumer's stream are the right ones.
  DataLoader pre(d.images, d.labels, on(Device::cuda(), options));
  const cuda::Stream user = cuda::Stream::create();
  for (const cuda::Stream& stream : {cuda::current_stream(), user}) {
    cuda::StreamGuard guard(stream);
    pre.set_epoch(0);
    std::vector<Seen> got;
    for (auto [x, y] : pre) {
      cuda::current_stream().synchronize();
      got.push_back(seen(pre, x, y));
    }
    CHECK(got == expected);
    const uintptr_t side = pre.prefetch_stats().copy_stream;
    CHECK(side != 0);
    CHECK(side != reinterpret_cast<uintptr_t>(stream.handle()));
    CHECK(side != reinterpret_cast<uintptr_t>(cuda::Stream::default_stream().handle()));
  }

  // Changing the current stream between batches drops the staged batch (its
  // memory belongs to the old stream's pool) and copies again for the new one.
  pre.set_epoch(0);
  std::vector<Seen> got;
  const PrefetchStats before = pre.prefetch_stats();
  for (auto [x, y] : pre) {
    got.push_back(seen(pre, x, y));
    if (got.size() == 2) {
      // From the third batch on, the loop runs on `user`.
      cuda::set_current_stream(user);
    }
  }
  cuda::set_current_stream(cuda::Stream::default_stream());
  CHECK(got == expected);
  CHECK(pre.prefetch_stats().discarded == before.discarded + 1);
}

TEST_CASE("prefetch keeps resuming, breaking and skipping exact", "[data][prefetch][cuda][needs-cuda]") {
  if (!have_cuda()) HG_SKIP("no CUDA device");
  const Data d = make_data(70);
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 9};
  DataLoader cpu(d.images, d.labels, options);
  const auto reference = epochs(cpu, 6);  // 9 batches per epoch
  const size_t per_epoch = 9;
  auto ref = [&](uint64_t epoch, int64_t index) {
    return reference[epoch * per_epoch + static_cast<size_t>(index)];
  };

  SECTION("set_epoch + skip mid-epoch gives the remaining batches") {
    DataLoader full(d.images, d.labels, on(Device::cuda(), options));
    pass(full);
    const auto first = pass(full, 4);  // break inside epoch 1 after 4 batches
    REQUIRE(first.size() == 4);
    CHECK(full.epoch() == 1);
    CHECK(full.position() == 4);  // prefetching did not move it ahead

    DataLoader resumed(d.images, d.labels, on(Device::cuda(), options));
    resumed.set_epoch(full.epoch());
    resumed.skip(full.position());
    const auto rest = pass(resumed);
    REQUIRE(rest.size() == per_epoch - 4);
    for (size_t i = 0; i < rest.size(); ++i) CHECK(rest[i] == ref(1, static_cast<int64_t>(4 + i)));
    CHECK(resumed.epoch() == 2);
    CHECK(pass(resumed) == std::vector<Seen>(reference.begin() + 2 * per_epoch,
                                             reference.begin() + 3 * per_epoch));
  }

  SECTION("break, then continue the same pass") {
    DataLoader loader(d.images, d.labels, on(Device::cuda(), options));
    const auto a = pass(loader, 3);
    const PrefetchStats mid = loader.prefetch_stats();
    const auto b = pass(loader);  // continues at position 3 with the staged batch
    CHECK(loader.prefetch_stats().misses == mid.misses);
    REQUIRE(a.size() + b.size() == per_epoch);
    for (size_t i = 0; i < per_epoch; ++i) {
      CHECK((i < 3 ? a[i] : b[i - 3]) == ref(0, static_cast<int64_t>(i)));
    }
  }

  SECTION("break, skip or set_epoch, then continue: staged work is discarded") {
    DataLoader loader(d.images, d.labels, on(Device::cuda(), options));
    pass(loader, 2);       // epoch 0, position 2, batch 2 staged
    loader.skip(3);        // position 5
    auto rest = pass(loader, 2);
    REQUIRE(rest.size() == 2);
    CHECK(rest[0] == ref(0, 5));
    CHECK(rest[1] == ref(0, 6));
    CHECK(loader.prefetch_stats().discarded == 1);

    loader.set_epoch(4);   // batch 7 of epoch 0 was staged
    rest = pass(loader);
    CHECK(rest == std::vector<Seen>(reference.begin() + 4 * per_epoch,
                                    reference.begin() + 5 * per_epoch));
    CHECK(loader.prefetch_stats().discarded == 2);

    loader.set_position(per_epoch - 1);  // epoch 5, only the last batch
    rest = pass(loader);
    REQUIRE(rest.size() == 1);
    CHECK(rest[0] == ref(5, static_cast<int64_t>(per_epoch - 1)));
    CHECK(loader.epoch() == 6);

    // Dereferencing the same iterator twice gives the same batch twice.
    loader.set_epoch(0);
    auto it = loader.begin();
    const Batch b1 = *it;
    const Batch b2 = *it;
    CHECK(bytes_of(b1.x) == bytes_of(b2.x));
    CHECK(bytes_of(b2.y) == ref(0, 0).y);
    CHECK(loader.position() == 1);
    ++it;
    const Batch b3 = *it;
    CHECK(bytes_of(b3.x) == ref(0, 1).x);
  }
}

TEST_CASE("a loader destroyed mid-pass joins its thread and frees its memory", "[data][prefetch][cuda][needs-cuda]") {
  if (!have_cuda()) HG_SKIP("no CUDA device");
  const Data d = make_data(200);
  const DataLoaderOptions options{.batch_size = 16, .shuffle = true, .seed = 2,
                                  .device = Device::cuda()};
  (void)ones({1}, {.device = Device::cuda()}).cpu();  // lazily created runtime state
  const size_t allocated_before = cuda::memory_stats().allocated_bytes;
  for (int round = 0; round < 20; ++round) {
    DataLoader loader(d.images, d.labels, options);
    if (round % 4 == 0) continue;  // never iterated: no thread at all
    int64_t n = 0;
    for (const Batch& batch : loader) {
      (void)batch;
      if (++n == round % 5 + 1) break;  // leave with a batch staged and one queued
    }
  }
  {
    // Destroyed while the caller still holds a batch: the batch stays valid.
    std::optional<DataLoader> loader(std::in_place, d.images, d.labels, options);
    Batch kept = *loader->begin();
    loader.reset();
    CHECK(kept.y.cpu().to_vector<int64_t>().size() == 16);
  }
  // Moving a loader between passes carries its prefetcher along.
  DataLoader a(d.images, d.labels, options);
  pass(a, 2);
  DataLoader b = std::move(a);
  CHECK(b.position() == 2);
  CHECK(pass(b).size() == static_cast<size_t>(b.num_batches() - 2));
  CHECK(cuda::memory_stats().allocated_bytes == allocated_before);
}

TEST_CASE("an error in the prefetch thread is rethrown at the dereference", "[data][prefetch][cuda][needs-cuda]") {
  if (!have_cuda()) HG_SKIP("no CUDA device");
  const Data d = make_data(60);
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 4};
  DataLoader cpu(d.images, d.labels, options);
  const auto reference = pass(cpu);

  for (int64_t fault_at : {int64_t{0}, int64_t{1}, int64_t{4}}) {
    INFO("fault at batch " << fault_at);
    DataLoader loader(d.images, d.labels, on(Device::cuda(), options));
    std::vector<Seen> got;
    {
      FaultGuard fault(fault_at);
      auto it = loader.begin();
      for (; it != loader.end(); ++it) {
        if (static_cast<int64_t>(got.size()) == fault_at) break;
        auto [x, y] = *it;
        got.push_back(seen(loader, x, y));
      }
      REQUIRE(static_cast<int64_t>(got.size()) == fault_at);
      CHECK_THROWS_WITH(*it, Catch::Contains("injected fault at batch"));
      CHECK(loader.position() == fault_at);  // only the batches handed out
    }
    // The fault is gone: the pass continues where it stopped.
    for (auto [x, y] : loader) got.push_back(seen(loader, x, y));
    CHECK(got == reference);
  }
}

// Not a unit test: times one epoch of Fashion-MNIST train (60,000 samples,
// batch 128, shuffled) on the CPU and on CUDA with prefetch off and on, with
// no work per step, 500 us of busy host work per step (a host-bound step) and
// a 500 us sleep per step (the host waiting for the GPU, e.g. on loss.item()).
// Run: test_data "[.bench-prefetch]"
TEST_CASE("prefetch timing on Fashion-MNIST", "[.bench-prefetch]") {
  if (!std::filesystem::exists(std::string(FashionMnist::kDefaultRoot) +
                               "/train-images-idx3-ubyte.gz")) {
    FAIL("Fashion-MNIST not installed; apt-get install dataset-fashion-mnist");
  }
  const FashionMnist train;
  struct Config {
    const char* name;
    Device device;
    bool prefetch;
  };
  std::vector<Config> configs{{"cpu", Device::cpu(), false}};
  if (have_cuda()) {
    configs.push_back({"cuda, prefetch off", Device::cuda(), false});
    configs.push_back({"cuda, prefetch on", Device::cuda(), true});
  }
  enum class Work { kNone, kBusy, kSleep };
  for (Work work : {Work::kNone, Work::kBusy, Work::kSleep}) {
    const char* work_name = work == Work::kNone ? "none" : work == Work::kBusy ? "busy 500us"
                                                                               : "sleep 500us";
    for (const Config& c : configs) {
      DataLoader loader(train.images(), train.labels(),
                        {.batch_size = 128, .shuffle = true, .seed = 42, .mean = 0.2860,
                         .std = 0.3530, .device = c.device, .prefetch = c.prefetch});
      double best_ms = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        for (const Batch& batch : loader) {
          (void)batch;
          if (work == Work::kBusy) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(500);
            while (std::chrono::steady_clock::now() < until) {
            }
          } else if (work == Work::kSleep) {
            std::this_thread::sleep_for(std::chrono::microseconds(500));
          }
        }
        const double ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start).count();
        best_ms = std::min(best_ms, ms);
      }
      std::printf("%-20s work/step %-12s epoch %8.1f ms (%d batches)\n", c.name, work_name,
                  best_ms, static_cast<int>(loader.num_batches()));
    }
  }
}

#else

// The CUDA cases above, in a build without the CUDA backend: reported skipped.
TEST_CASE("prefetch to a CUDA device", "[data][prefetch][needs-cuda]") {
  HG_SKIP("built without the CUDA backend (the prefetch cases need a CUDA device)");
}

TEST_CASE("prefetch is CUDA-only", "[data][prefetch]") {
  // The CPU build has no prefetcher: the option is accepted and ignored.
  std::vector<uint8_t> pixels(12, 7);
  DataLoader loader(from_vector(pixels, {3, 4}), from_vector(std::vector<int64_t>{0, 1, 2}, {3}),
                    {.batch_size = 2, .prefetch = true});
  int64_t n = 0;
  for (auto [x, y] : loader) n += y.numel();
  CHECK(n == 3);
  CHECK(loader.prefetch_stats().misses == 0);
}

#endif
