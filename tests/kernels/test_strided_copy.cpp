// The CUDA elementwise engine's strided paths (kernels/elementwise/elementwise.cuh)
// against the CPU copy: transposes (the tiled shared-memory kernel),
// broadcasts (stride 0, inner and outer), slices, permutations of odd sizes,
// strided destinations, casts through a transposed view, every dtype, empty
// tensors, the 64-bit fallback (forced) and the index-width decision for a
// broadcast view of 3 * 10^9 virtual elements (not allocated). Every copy
// must be bit-exact: a copy or cast rounds the same way on both backends.
// Also the fast divisor (kernels/elementwise/int_divider.h) against `/`.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "kernels/elementwise/int_divider.h"
#include "kernels/elementwise/map_stats.h"
#endif

using namespace hg;
using namespace hg::test;

#if defined(HG_WITH_CUDA)

namespace {

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes{kF32, kF16, kBF16, kF64, kI64, kI32, kU8, kBool, kF8E4M3, kF8E5M2};
  return dtypes;
}

struct LayoutCase {
  const char* name;
  Shape shape;                                  // the source tensor's shape
  std::function<Tensor(const Tensor&)> layout;  // the strided view the copy reads
  cuda::MapPath f32_path;                       // the path an f32 copy of it takes
};

const std::vector<LayoutCase>& layout_cases() {
  using P = cuda::MapPath;
  static const std::vector<LayoutCase> cases{
      {"transpose-2d", {37, 45}, [](const Tensor& x) { return x.transpose(0, 1); }, P::kTranspose},
      {"transpose-2d-tiles", {64, 96}, [](const Tensor& x) { return x.transpose(0, 1); }, P::kTranspose},
      {"transpose-batched", {3, 33, 40}, [](const Tensor& x) { return x.transpose(1, 2); }, P::kTranspose},
      {"transpose-4d-batches", {2, 3, 17, 9}, [](const Tensor& x) { return x.transpose(2, 3); }, P::kTranspose},
      {"heads-bthd-to-bhtd", {2, 5, 3, 16}, [](const Tensor& x) { return x.transpose(1, 2); }, P::kVectorRuns},
      {"broadcast-rows",
       {64},
       [](const Tensor& x) {
         return x.expand({9, 64});
       },
       P::kVectorRuns},
      {"broadcast-rows-odd",
       {7},
       [](const Tensor& x) {
         return x.expand({5, 7});
       },
       P::kStrided32},
      {"broadcast-cols",
       {5, 1},
       [](const Tensor& x) {
         return x.expand({5, 64});
       },
       P::kVectorRuns},
      {"broadcast-scalar",
       {1},
       [](const Tensor& x) {
         return x.expand({3, 4, 5});
       },
       P::kVectorRuns},
      {"slice-aligned", {10, 40}, [](const Tensor& x) { return x.narrow(1, 8, 32); }, P::kVectorRuns},
      {"slice-misaligned", {10, 40}, [](const Tensor& x) { return x.narrow(1, 3, 32); }, P::kStrided32},
      {"permute-odd",
       {3, 5, 7},
       [](const Tensor& x) {
         return x.permute({2, 0, 1});
       },
       P::kStrided32},
      {"step-rows",
       {12, 13},
       [](const Tensor& x) {
         return x.as_strided({6, 13}, {26, 1}, 0);
       },
       P::kStrided32},
      {"transpose-narrow", {3, 2}, [](const Tensor& x) { return x.transpose(0, 1); }, P::kStrided32},
      {"empty", {0, 5}, [](const Tensor& x) { return x.transpose(0, 1); }, P::kContiguous},
  };
  return cases;
}

Tensor cuda_dev(const Tensor& t) { return t.to(Device::cuda(0)); }

}  // namespace

TEST_CASE("strided copy on CUDA matches the CPU copy, every layout and dtype", "[kernels][strided]") {
  for (const bool force64 : {false, true}) {
    cuda::force_map_index64(force64);
    for (DType dtype : all_dtypes()) {
      for (const LayoutCase& c : layout_cases()) {
        INFO(c.name << " " << dtype << (force64 ? " (64-bit path forced)" : ""));
        const Tensor src = make_input(c.shape, dtype, Domain::kAny, 17);
        const Tensor expected = c.layout(src).contiguous();
        const Tensor view = c.layout(cuda_dev(src));
        const Tensor got = view.contiguous();
        REQUIRE(got.sizes() == expected.sizes());
        CHECK(got.is_contiguous());
        CHECK(values_of(got) == values_of(expected));
        if (dtype == kF32 && !view.is_contiguous() && view.numel() > 0) {
          const cuda::MapPath path = cuda::map_path_for(got, {view});
          CHECK(std::string(cuda::map_path_name(path)) ==
                cuda::map_path_name(force64 ? cuda::MapPath::kStrided64 : c.f32_path));
        }
      }
    }
  }
  cuda::force_map_index64(false);
}

TEST_CASE("strided copy: casts through views, strided destinations, counters", "[kernels][strided]") {
  const Tensor src = make_input({33, 70}, kF32, Domain::kAny, 5);
  // A cast read through a transposed view (the tiled kernel with a functor).
  for (DType to : {kBF16, kF16, kF64, kI32, kF8E4M3, kF8E5M2}) {
    INFO("cast to " << to);
    CHECK(values_of(cuda_dev(src).transpose(0, 1).to(to)) == values_of(src.transpose(0, 1).to(to)));
  }
  // Writes into a transposed destination and into a column slice.
  Tensor dst = zeros({70, 33}, {.device = Device::cuda(0)});
  dst.transpose(0, 1).copy_(cuda_dev(src));
  CHECK(values_of(dst) == values_of(src.transpose(0, 1).contiguous()));
  Tensor wide = zeros({33, 80}, {.dtype = kBF16, .device = Device::cuda(0)});
  wide.narrow(1, 8, 70).copy_(cuda_dev(src));
  Tensor wide_cpu = zeros({33, 80}, {.dtype = kBF16});
  wide_cpu.narrow(1, 8, 70).copy_(src);
  CHECK(values_of(wide) == values_of(wide_cpu));
  // A binary op on a broadcast and a transposed operand (the 32-bit path with two inputs).
  const Tensor bias = make_input({33}, kF32, Domain::kAny, 6);
  const Tensor sq = make_input({33, 33}, kF32, Domain::kAny, 8);
  CHECK(values_of(ops::add(cuda_dev(sq).transpose(0, 1), cuda_dev(bias))) ==
        values_of(ops::add(sq.transpose(0, 1), bias)));
  // The counters see a transposing copy as one launch of R * C elements.
  const Tensor on_device = cuda_dev(src);
  cuda::reset_map_stats();
  (void)on_device.transpose(0, 1).contiguous();
  const cuda::MapStats s = cuda::map_stats();
  const auto t = static_cast<size_t>(cuda::MapPath::kTranspose);
  CHECK(s.launches[t] == 1);
  CHECK(s.elements[t] == 33 * 70);
  CHECK(s.bytes[t] == 33 * 70 * 8);
}

TEST_CASE("strided copy: sizes past 2^31 take the 64-bit path", "[kernels][strided]") {
  // A broadcast view of 3 * 10^9 elements over one stored element: asking for
  // the path reads the layout only, nothing of that size is allocated.
  const Tensor one = zeros({1}, {.device = Device::cuda(0)});
  const Tensor huge = one.expand({3000000000});
  CHECK(cuda::map_path_for(huge, {huge}) == cuda::MapPath::kStrided64);
  const Tensor huge2d = one.expand({2, 1500000000}).transpose(0, 1);
  CHECK(cuda::map_path_for(huge2d, {huge2d}) == cuda::MapPath::kStrided64);
  // Just below the limit the 32-bit path is exact and taken.
  const Tensor below = one.expand({2, INT32_MAX / 2});
  CHECK(cuda::map_path_for(below.transpose(0, 1), {below.transpose(0, 1)}) == cuda::MapPath::kStrided32);
}

TEST_CASE("IntDivider divides like /", "[kernels][strided]") {
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= 1100; ++d) divisors.push_back(d);
  for (int s = 11; s <= 31; ++s) {
    const int64_t p = int64_t{1} << s;
    for (int64_t d : {p - 1, p, p + 1, p / 3, p - p / 7}) {
      if (d >= 1 && d <= INT32_MAX) divisors.push_back(d);
    }
  }
  divisors.insert(divisors.end(), {46341, 50257, 50304, 65535, 786433, INT32_MAX});
  Generator gen(3);
  const std::vector<double> u = rand({4000}, {.dtype = kF64}, &gen).to_vector<double>();
  std::vector<uint32_t> numerators{0, 1, 2, 3, 1023, 1024, 65535, 65536, INT32_MAX - 1, INT32_MAX};
  for (double x : u) numerators.push_back(static_cast<uint32_t>(x * INT32_MAX));
  int64_t wrong = 0;
  for (int64_t d : divisors) {
    const cuda::IntDivider div(d);
    std::vector<uint32_t> ns = numerators;
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{7}, INT32_MAX / d}) {  // around multiples of d
      for (int64_t delta : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        const int64_t n = k * d + delta;
        if (n >= 0 && n <= INT32_MAX) ns.push_back(static_cast<uint32_t>(n));
      }
    }
    for (uint32_t n : ns) wrong += div.div(n) != n / static_cast<uint32_t>(d);
  }
  CHECK(wrong == 0);
  CHECK_THROWS_WITH(cuda::IntDivider(0), Catch::Contains("outside [1, 2^31)"));
  CHECK_THROWS_WITH(cuda::IntDivider(int64_t{1} << 31), Catch::Contains("outside [1, 2^31)"));
}

#endif  // HG_WITH_CUDA
