// Checked shape arithmetic (core/shape.h) and the memory safety of views:
// regression tests for the overflows found by fuzzing, and a property test
// that throws random huge shapes, strides and offsets at every view op.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/tensor.h"

using namespace hg;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("checked shape helpers throw on overflow instead of wrapping", "[core][shape]") {
  CHECK(numel_of({int64_t{1} << 40, int64_t{1} << 40, 0}) == 0);  // a 0 wins, whatever the order
  CHECK_THROWS_WITH(numel_of({int64_t{1} << 32, int64_t{1} << 32}), Catch::Contains("more than 2^63 elements"));
  CHECK_THROWS_WITH(numel_of({2, -1}), Catch::Contains("negative size"));
  CHECK_THROWS_WITH(nbytes_of({int64_t{1} << 62}, kF64), Catch::Contains("more than 2^63 bytes"));
  CHECK(contiguous_strides({2, 0, 3}) == Shape{3, 3, 1});
  // [0, 2^62, 4]: no elements, but the strides 4 x 2^62 do not fit (was signed overflow, UB).
  CHECK_THROWS_WITH(contiguous_strides({0, int64_t{1} << 62, 4}), Catch::Contains("no row-major strides"));
  CHECK(view_extent({3, 4}, {4, 1}, 5, "t") == 17);
  CHECK(view_extent({0, 4}, {kMax, kMax}, 5, "t") == 5);
  CHECK_THROWS_WITH(view_extent({3}, {(int64_t{1} << 62) + (1 << 20)}, 0, "t"), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(checked_add(kMax, 1, "op", "x"), Catch::Contains("op: x overflows 64 bits"));
  CHECK_THROWS_WITH(checked_mul(kMin, -1, "op", "x"), Catch::Contains("overflows"));
}

TEST_CASE("factories and views reject shapes whose arithmetic overflows", "[core][shape]") {
  CHECK_THROWS_AS(empty({0, int64_t{1} << 62, 4}), Error);
  const Tensor a = arange(12);
  // (size - 1) x stride wrapped to a small number: the view was accepted and
  // fill_/to_vector wrote and read far outside the 12 elements.
  CHECK_THROWS_WITH(a.as_strided({3}, {(int64_t{1} << 62) + (1 << 20)}, 0), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(a.as_strided({2}, {kMax / 2}, 0), Catch::Contains("reach element"));
  CHECK_THROWS_WITH(a.as_strided({2}, {1}, kMax), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(a.narrow(0, 1, kMax), Catch::Contains("out of bounds"));  // start + length overflowed
  CHECK(a.slice(0, 1, 12, kMax).to_vector<float>() == std::vector<float>{1});
  CHECK(a.slice(0, 0, 12, kMax - 1).sizes() == Shape{1});
  // An empty tensor may carry any sizes; its derived views must not overflow either.
  const Tensor e = zeros({0, 1}).expand({0, int64_t{1} << 40});
  CHECK_THROWS_AS(e.unsqueeze(3).expand({0, int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40}).flatten(1), Error);
  CHECK_THROWS_AS(zeros({1}).expand({int64_t{1} << 32, int64_t{1} << 32}), Error);
}

TEST_CASE("copy_ refuses a destination whose elements share memory", "[core][shape]") {
  Tensor row = zeros({1, 3});
  Tensor expanded = row.expand({4, 3});
  CHECK_THROWS_WITH(expanded.copy_(arange(12).reshape({4, 3})), Catch::Contains("share memory"));
  CHECK(row.to_vector<float>() == std::vector<float>{0, 0, 0});  // unchanged
  Tensor same_stride = arange(6).as_strided({2, 2}, {1, 1}, 0);
  CHECK_THROWS_WITH(same_stride.copy_(zeros({2, 2})), Catch::Contains("share memory"));
  expanded.fill_(2.0);  // one value: the order cannot matter
  CHECK(row.to_vector<float>() == std::vector<float>{2, 2, 2});
  Tensor base = zeros({3, 4});
  base.transpose(0, 1).slice(0, 1, 3).copy_(ones({2, 3}));  // strided, non-overlapping: fine
  CHECK(base.to_vector<float>() == std::vector<float>{0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0});
}

namespace {

__extension__ typedef __int128 Int128;  // exact products of two int64 values

// Sizes, strides, offsets and indices: mostly small, often extreme.
int64_t pick(std::mt19937_64& rng) {
  static constexpr int64_t kExtreme[] = {0,       1,        2,         -1,         kMax,        kMin,
                                         kMax - 1, int64_t{1} << 62, (int64_t{1} << 62) + (1 << 20),
                                         int64_t{1} << 32, (int64_t{1} << 31) - 1, -(int64_t{1} << 62)};
  switch (rng() % 4) {
    case 0: return kExtreme[rng() % std::size(kExtreme)];
    case 1: return static_cast<int64_t>(rng());
    default: return static_cast<int64_t>(rng() % 7) - 1;
  }
}

Shape pick_shape(std::mt19937_64& rng, size_t max_rank = 4) {
  Shape s(rng() % (max_rank + 1));
  for (int64_t& v : s) v = pick(rng);
  return s;
}

// The invariant of every view, computed in 128 bits: sizes >= 0, numel fits
// int64, and a view with elements stays inside its storage.
void require_in_bounds(const Tensor& t) {
  Int128 numel = 1, last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    REQUIRE(t.sizes()[d] >= 0);
    REQUIRE(t.strides()[d] >= 0);
    numel *= t.sizes()[d];
    if (numel > kMax) numel = kMax + static_cast<Int128>(1);  // saturate: stays "too big"
  }
  if (numel == 0) return;
  REQUIRE(numel <= kMax);
  REQUIRE(t.offset() >= 0);
  for (int64_t d = 0; d < t.dim(); ++d) last += static_cast<Int128>(t.sizes()[d] - 1) * t.strides()[d];
  const Int128 capacity = static_cast<Int128>(t.storage()->nbytes() / t.element_size());
  REQUIRE(last < capacity);
}

}  // namespace

TEST_CASE("every view op gives an hg::Error or an in-bounds view (random huge shapes and strides)",
          "[core][shape][property]") {
  std::mt19937_64 rng(20261203);
  using Op = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"view", [&](const Tensor& t) { return t.view(pick_shape(rng)); }},
      {"reshape", [&](const Tensor& t) { return t.reshape(pick_shape(rng)); }},
      {"flatten", [&](const Tensor& t) { return t.flatten(pick(rng), pick(rng)); }},
      {"transpose", [&](const Tensor& t) { return t.transpose(pick(rng), pick(rng)); }},
      {"t", [&](const Tensor& t) { return t.t(); }},
      {"permute", [&](const Tensor& t) { return t.permute(pick_shape(rng)); }},
      {"slice", [&](const Tensor& t) { return t.slice(pick(rng), pick(rng), pick(rng), pick(rng)); }},
      {"narrow", [&](const Tensor& t) { return t.narrow(pick(rng), pick(rng), pick(rng)); }},
      {"select", [&](const Tensor& t) { return t.select(pick(rng), pick(rng)); }},
      {"expand", [&](const Tensor& t) { return t.expand(pick_shape(rng, 6)); }},
      {"squeeze", [&](const Tensor& t) { return t.squeeze(); }},
      {"squeeze(d)", [&](const Tensor& t) { return t.squeeze(pick(rng)); }},
      {"unsqueeze", [&](const Tensor& t) { return t.unsqueeze(pick(rng)); }},
      {"as_strided", [&](const Tensor& t) { return t.as_strided(pick_shape(rng), pick_shape(rng), pick(rng)); }},
      {"as_strided(rank-matched)",
       [&](const Tensor& t) {
         Shape sizes = pick_shape(rng);
         Shape strides(sizes.size());
         for (int64_t& s : strides) s = pick(rng);
         return t.as_strided(sizes, strides, static_cast<int64_t>(rng() % 4));
       }},
      {"contiguous", [&](const Tensor& t) { return t.contiguous(); }},
  };
  int64_t accepted = 0, touched = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    Tensor t = arange(static_cast<double>(rng() % 24));
    for (int depth = 0; depth < 5; ++depth) {
      const auto& [name, op] = ops[rng() % ops.size()];
      INFO("trial " << trial << " depth " << depth << " op " << name << " on " << t.shape_str() << " strides "
                    << shape_to_string(t.strides()) << " offset " << t.offset());
      Tensor out;
      try {
        out = op(t);
      } catch (const Error&) {
        continue;  // refused: fine
      }
      require_in_bounds(out);
      ++accepted;
      // Read and write every element of small results (ASan sees any stray access).
      if (out.numel() > 0 && out.numel() <= 4096) {
        (void)out.to_vector<float>();
        out.fill_(1.0);
        ++touched;
      }
      t = out;
    }
  }
  CHECK(accepted > 1000);  // the test exercises real views, not only refusals
  CHECK(touched > 500);
}
