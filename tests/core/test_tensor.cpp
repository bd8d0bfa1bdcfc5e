// Tensor handles: views (sizes, strides, offsets, shared storage), copies,
// casts, factories, printing, and the errors bad input must raise.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

using namespace hg;

namespace {
// A [rows, cols] f32 tensor holding 0, 1, 2, ... in row-major order.
Tensor iota(Shape shape) {
  const int64_t n = numel_of(shape);
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return from_vector(v, std::move(shape));
}
// Reference element of a strided view, computed from sizes/strides by hand.
float at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = t.offset();
  size_t d = 0;
  for (int64_t i : idx) off += i * t.strides()[d++];
  return static_cast<const float*>(t.storage()->data())[off];
}
}  // namespace

TEST_CASE("factories make contiguous tensors with the right values", "[core][tensor]") {
  Tensor z = zeros({2, 3});
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.is_contiguous());
  CHECK(z.dtype() == kF32);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ones({4}, {.dtype = kF16}).to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(full({2, 2}, 2.5, {.dtype = kBF16}).to_vector<double>() == std::vector<double>(4, 2.5));
  CHECK(arange(5, {.dtype = kI64}).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1, 2, 0.25).to_vector<float>() == std::vector<float>{1, 1.25, 1.5, 1.75});
  CHECK(arange(3, 0, -1, {.dtype = kI32}).to_vector<int>() == std::vector<int>{3, 2, 1});
  Tensor s = scalar_tensor(7.0);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<float>() == 7.0f);
  CHECK(empty({0, 5}).numel() == 0);
  CHECK(from_vector(std::vector<half>{half(1.5f)}).dtype() == kF16);
}

TEST_CASE("bad sizes and factory arguments throw hg::Error", "[core][tensor][errors]") {
  CHECK_THROWS_WITH(zeros({2, -3}), Catch::Contains("negative size -3"));
  CHECK_THROWS_WITH(from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                    Catch::Contains("3 values do not fill shape [2, 2]"));
  CHECK_THROWS_WITH(arange(0, 5, -1), Catch::Contains("flip the sign"));
  CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("non-zero"));
  CHECK_THROWS_WITH(rand({3}, {.dtype = kI32}), Catch::Contains("floating dtype"));
  CHECK_THROWS_WITH(Tensor().numel(), Catch::Contains("undefined hg::Tensor"));
  CHECK_THROWS_WITH(zeros({2}).item<float>(), Catch::Contains("exactly one element"));
  CHECK_THROWS_WITH(zeros({2}).data<half>(), Catch::Contains("dtype f32"));
}

TEST_CASE("transpose, permute and t share storage with swapped strides", "[core][tensor][views]") {
  Tensor a = iota({2, 3, 4});
  Tensor b = a.transpose(0, 2);
  CHECK(b.sizes() == Shape{4, 3, 2});
  CHECK(b.strides() == Shape{1, 4, 12});
  CHECK(b.shares_storage_with(a));
  CHECK_FALSE(b.is_contiguous());
  CHECK(at(b, {3, 1, 1}) == at(a, {1, 1, 3}));
  Tensor p = a.permute({1, 2, 0});
  CHECK(p.sizes() == Shape{3, 4, 2});
  CHECK(p.strides() == Shape{4, 1, 12});
  Tensor c = p.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage_with(a));
  // contiguous() must gather: c[i][j][k] == a[k][i][j].
  const auto cv = c.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k) CHECK(cv[(i * 4 + j) * 2 + k] == at(a, {k, i, j}));
  CHECK(iota({2, 3}).t().sizes() == Shape{3, 2});
  CHECK_THROWS_WITH(a.permute({0, 0, 1}), Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(a.permute({0, 1}), Catch::Contains("rank 3"));
  CHECK_THROWS_WITH(a.transpose(0, 3), Catch::Contains("dimension 3 is out of range"));
  CHECK_THROWS_WITH(a.t(), Catch::Contains("at most 2 dims"));
}

TEST_CASE("slice, narrow and select move the offset", "[core][tensor][views]") {
  Tensor a = iota({4, 6});
  Tensor s = a.slice(1, 1, 5, 2);  // columns 1 and 3
  CHECK(s.sizes() == Shape{4, 2});
  CHECK(s.strides() == Shape{6, 2});
  CHECK(s.offset() == 1);
  CHECK(s.to_vector<float>() == std::vector<float>{1, 3, 7, 9, 13, 15, 19, 21});
  Tensor n = a.narrow(0, -2, 2);  // last two rows
  CHECK(n.offset() == 12);
  CHECK(n.is_contiguous());
  Tensor row = a.select(0, 2);
  CHECK(row.sizes() == Shape{6});
  CHECK(row.offset() == 12);
  CHECK(a.select(1, -1).to_vector<float>() == std::vector<float>{5, 11, 17, 23});
  CHECK(a.slice(0, 2, 2).numel() == 0);  // empty slice is fine
  CHECK_THROWS_WITH(a.slice(1, 2, 9), Catch::Contains("out of bounds for dim 1 of size 6"));
  CHECK_THROWS_WITH(a.slice(1, 4, 2), Catch::Contains("out of bounds"));
  CHECK_THROWS_WITH(a.slice(0, 0, 2, 0), Catch::Contains("step must be >= 1"));
  CHECK_THROWS_WITH(a.narrow(0, 3, 2), Catch::Contains("out of bounds"));
  CHECK_THROWS_WITH(a.select(0, 4), Catch::Contains("index 4 is out of bounds"));
}

TEST_CASE("view and reshape follow the stride rules", "[core][tensor][views]") {
  Tensor a = iota({2, 3, 4});
  Tensor v = a.view({6, -1});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.shares_storage_with(a));
  CHECK(a.view({24}).strides() == Shape{1});
  // Transposed: merging the swapped dims has no view, but splitting still works.
  Tensor t = a.transpose(1, 2);  // [2, 4, 3] strides [12, 1, 4]
  CHECK_THROWS_WITH(t.view({2, 12}), Catch::Contains("use reshape()"));
  Tensor r = t.reshape({2, 12});
  CHECK_FALSE(r.shares_storage_with(a));
  CHECK(r.to_vector<float>() == t.contiguous().to_vector<float>());
  Tensor split = t.view({2, 2, 2, 3});  // splits the stride-1 dim
  CHECK(split.shares_storage_with(a));
  CHECK(split.strides() == Shape{12, 2, 1, 4});
  // A column slice keeps rows contiguous: [4,6]->[4,2,3] is a view.
  Tensor cols = iota({4, 6}).slice(1, 0, 6);
  CHECK(cols.view({4, 2, 3}).shares_storage_with(cols));
  CHECK(scalar_tensor(3).view({1, 1}).sizes() == Shape{1, 1});
  CHECK(a.flatten().sizes() == Shape{24});
  CHECK(a.flatten(1).sizes() == Shape{2, 12});
  CHECK_THROWS_WITH(a.view({5, 5}), Catch::Contains("25 elements but the tensor (shape [2, 3, 4]) has 24"));
  CHECK_THROWS_WITH(a.reshape({-1, 5}), Catch::Contains("invalid for a tensor of 24 elements"));
  CHECK_THROWS_WITH(a.view({-1, -1}), Catch::Contains("only one dimension can be -1"));
}

TEST_CASE("expand, squeeze and unsqueeze", "[core][tensor][views]") {
  Tensor col = iota({3, 1});
  Tensor e = col.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.contiguous().to_vector<float>()[5] == 1.0f);  // [0][1][1] == col[1]
  CHECK(col.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK_THROWS_WITH(col.expand({4, 1}), Catch::Contains("cannot expand dim 0 of size 3 to 4"));
  CHECK_THROWS_WITH(col.expand({3}), Catch::Contains("fewer dims"));
  Tensor u = iota({3, 4}).unsqueeze(1);
  CHECK(u.sizes() == Shape{3, 1, 4});
  CHECK(u.squeeze().sizes() == Shape{3, 4});
  CHECK(u.squeeze(1).sizes() == Shape{3, 4});
  CHECK(u.squeeze(0).sizes() == Shape{3, 1, 4});  // size 3: unchanged
  CHECK(iota({3}).unsqueeze(-1).sizes() == Shape{3, 1});
  CHECK_THROWS_AS(iota({3}).unsqueeze(3), Error);
}

TEST_CASE("as_strided checks the storage bounds", "[core][tensor][views]") {
  Tensor a = iota({10});
  CHECK(a.as_strided({3, 3}, {1, 1}, 2).to_vector<float>() ==
        std::vector<float>{2, 3, 4, 3, 4, 5, 4, 5, 6});
  CHECK_THROWS_WITH(a.as_strided({3, 3}, {3, 1}, 2), Catch::Contains("holds 10 elements"));
}

TEST_CASE("copy_, fill_ and views bump the shared version counter", "[core][tensor]") {
  Tensor a = zeros({2, 3});
  Tensor row = a.select(0, 1);
  const uint64_t v0 = a.version();
  row.fill_(4.0);
  CHECK(a.version() == v0 + 1);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 0, 0, 4, 4, 4});
  a.select(1, 0).copy_(from_vector(std::vector<double>{-1.0}));  // broadcast + convert
  CHECK(a.version() == v0 + 2);
  CHECK(a.to_vector<float>() == std::vector<float>{-1, 0, 0, -1, 4, 4});
  CHECK_THROWS_WITH(a.copy_(zeros({4})), Catch::Contains("cannot expand"));
}

TEST_CASE("strided copies: row-contiguous permutes and strided destinations, every dtype", "[core][tensor]") {
  // [2, 3, 4, D] -> permute(0, 2, 1, 3) (rows of D contiguous on both sides:
  // the row-memcpy path when D >= 8, the element loop below), checked element
  // by element against the index arithmetic.
  for (DType dt : {kF32, kF16, kBF16, kF64, kI64}) {
    for (int64_t d : {3, 8, 17}) {
      const Tensor a = arange(2 * 3 * 4 * d).to(dt).view({2, 3, 4, d});
      const Tensor p = a.permute({0, 2, 1, 3}).contiguous();
      REQUIRE(p.sizes() == Shape{2, 4, 3, d});
      const std::vector<double> got = p.to(kF64).to_vector<double>();
      const std::vector<double> src = a.to(kF64).to_vector<double>();
      bool same = true;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 4; ++j)
          for (int64_t k = 0; k < 3; ++k)
            for (int64_t l = 0; l < d; ++l)
              same = same && got[static_cast<size_t>(((i * 4 + j) * 3 + k) * d + l)] ==
                                 src[static_cast<size_t>(((i * 3 + k) * 4 + j) * d + l)];
      CHECK(same);
      // Into a strided destination (a permuted view of a fresh tensor).
      Tensor back = zeros({2, 3, 4, d}, {.dtype = dt});
      back.permute({0, 2, 1, 3}).copy_(p);
      CHECK(back.to(kF64).to_vector<double>() == src);
    }
  }
}

TEST_CASE("to(dtype) converts with round-to-nearest-even and saturating ints", "[core][tensor]") {
  Tensor x = from_vector(std::vector<float>{1.0f, 65519.0f, 65520.0f, 70000.0f, -2.5f, NAN, 1e-8f});
  const auto h = x.to(kF16).to_vector<float>();
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == 65504.0f);
  CHECK(std::isinf(h[2]));
  CHECK(std::isinf(h[3]));  // 70000 -> inf, never clamped or wrapped
  CHECK(h[4] == -2.5f);
  CHECK(std::isnan(h[5]));
  CHECK(h[6] == 0.0f);  // 1e-8 < 2^-25 rounds to zero
  const auto i = x.to(kI32).to_vector<int32_t>();
  CHECK(i[3] == 70000);
  CHECK(i[4] == -2);   // truncation toward zero
  CHECK(i[5] == 0);    // NaN -> 0 (documented rule)
  CHECK(from_vector(std::vector<double>{1e300, -1e300}).to(kI32).to_vector<int32_t>() ==
        std::vector<int32_t>{INT32_MAX, INT32_MIN});
  CHECK(from_vector(std::vector<float>{0.0f, 0.5f, NAN}).to(kBool).to_vector<bool>() ==
        std::vector<bool>{false, true, true});
  // f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is just above a tie, so it rounds up.
  const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(from_vector(std::vector<double>{above_tie}).to(kF16).item<float>() ==
        1.0f + std::ldexp(1.0f, -10));
  CHECK(x.to(kF32).shares_storage_with(x));  // same dtype: no copy
}

TEST_CASE("rand and randn are seeded and well distributed", "[core][tensor][random]") {
  Generator g1(123), g2(123);
  Tensor a = rand({1000}, {}, &g1);
  Tensor b = rand({1000}, {}, &g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  Tensor c = rand({1000}, {}, &g1);  // next offset: different numbers
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  double mean = 0;
  for (float v : a.to_vector<float>()) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
    mean += v;
  }
  mean /= 1000;
  CHECK(std::fabs(mean - 0.5) < 6 * std::sqrt(1.0 / 12 / 1000));
  Tensor n = randn({4000}, {.dtype = kF16}, &g1);
  CHECK(n.dtype() == kF16);
  double m = 0, sq = 0;
  for (float v : n.to_vector<float>()) {
    m += v;
    sq += double(v) * v;
  }
  m /= 4000;
  CHECK(std::fabs(m) < 6 / std::sqrt(4000.0));
  CHECK(std::fabs(sq / 4000 - 1.0) < 0.15);
}

TEST_CASE("tensors print like PyTorch", "[core][tensor][print]") {
  auto str = [](const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  CHECK(str(from_vector(std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f}, {2, 2})) ==
        "tensor([[ 1.5000, -2.0000],\n        [ 0.2500,  3.0000]])");
  CHECK(str(from_vector(std::vector<float>{1, 2, 3}).to(kF16)) == "tensor([1., 2., 3.], dtype=f16)");
  CHECK(str(arange(3, {.dtype = kI64})) == "tensor([0, 1, 2])");
  CHECK(str(scalar_tensor(2.5)) == "tensor(2.5000)");
  CHECK(str(zeros({0, 3})) == "tensor([], size=[0, 3])");
  CHECK(str(from_vector(std::vector<bool>{true, false})) == "tensor([ True, False])");
  CHECK(str(from_vector(std::vector<float>{1e-6f, 1.0f})) == "tensor([1.0000e-06, 1.0000e+00])");
  const std::string big = str(arange(2000));
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.size() < 200);
  CHECK(str(Tensor()) == "tensor(undefined)");
}

TEST_CASE("the cpu build refuses CUDA devices with a clear error", "[core][tensor][device]") {
#if !defined(HG_WITH_CUDA)
  CHECK_THROWS_WITH(zeros({2}, {.device = Device::cuda()}),
                    Catch::Contains("built without the CUDA backend"));
#else
  SUCCEED("CUDA backend present; device tests live in tests/cuda");
#endif
}
