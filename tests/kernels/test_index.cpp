// The embedding and the indexing and shape ops (kernels/index/index.h,
// autograd/functions_index.cpp, nn::Embedding): the embedding's padding_idx,
// deterministic backward and out-of-range indices, gathers, scatters, cat,
// stack, masks, split/chunk views, arange, gradcheck (f64), member views
// recording autograd and PyTorch's values (fixtures/make_seq_fixture.py).
// Tolerances come from tests/kernels/tolerance.h.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "kernels/index/index.h"
#include "nn/layers.h"
#include "tests/kernels/seq_support.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/device_error.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

// ---- embedding -------------------------------------------------------------------------------

TEST_CASE("embedding forward, padding_idx backward and out-of-range indices", "[kernels][embedding]") {
  const int64_t num = 10, dim = 5;
  const std::vector<int64_t> idx{3, 2, 3, 9, 0, 3};
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(dev, dtype, "embedding"));
      Tensor w = make_input({num, dim}, dtype, Domain::kAny, 21).to(dev).requires_grad_(true);
      const Tensor tokens = int_tensor(idx, {2, 3}, dev);
      Tensor y = hg::embedding(tokens, w, /*padding_idx=*/2);
      REQUIRE(y.sizes() == Shape{2, 3, dim});
      const std::vector<double> wv = values_of(w), yv = values_of(y);
      std::vector<double> want;
      for (int64_t t : idx) want.insert(want.end(), wv.begin() + t * dim, wv.begin() + (t + 1) * dim);
      CHECK(yv == want);  // a gather is exact
      const Tensor dy = make_input({2, 3, dim}, dtype, Domain::kAny, 22).to(dev);
      y.backward(dy);
      const std::vector<double> dyv = values_of(dy);
      std::vector<double> dw(static_cast<size_t>(num * dim), 0.0);
      for (size_t k = 0; k < idx.size(); ++k) {
        if (idx[k] == 2) continue;  // padding_idx gets no gradient
        for (int64_t c = 0; c < dim; ++c) dw[idx[k] * dim + c] += dyv[k * dim + c];
      }
      CHECK(compare_values(values_of(w.grad()), round_to(dw, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
    }
    const Tensor w = zeros({num, dim}, {.device = dev});
    const Tensor bad = int_tensor({1, 12, 0}, {3}, dev);
    if (dev.is_cpu()) {
      CHECK_THROWS_WITH(hg::embedding(bad, w), Contains("embedding") && Contains("12"));
      CHECK_THROWS_WITH(hg::embedding(int_tensor({-1}, {1}, dev), w), Contains("-1"));
    } else {
#if defined(HG_WITH_CUDA)
      // Reported through the device error flag at the next sync point.
      CHECK_THROWS_WITH(hg::embedding(bad, w).to(Device::cpu()), Contains("embedding") && Contains("12"));
      CHECK_NOTHROW(hg::cuda::check_device_errors());
#endif
    }
    CHECK_THROWS_WITH(hg::embedding(from_vector(std::vector<double>{1.0}).to(dev), w), Contains("i64 or i32"));
  }
}

TEST_CASE("embedding backward is deterministic (same bits, two runs)", "[kernels][embedding]") {
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kF16}) {
      const int64_t num = 50, n = 4096, dim = 64;
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) idx[i] = (i * 7919) % 13 == 0 ? 1 : (i * 31) % num;  // many repeats
      const Tensor tokens = int_tensor(idx, {n}, dev);
      const Tensor dy = make_input({n, dim}, dtype, Domain::kAny, 5).to(dev);
      const Tensor a = ops::embedding_backward(dy, tokens, num);
      const Tensor b = ops::embedding_backward(dy, tokens, num);
      INFO(label(dev, dtype, "embedding_backward"));
      CHECK(same_bits(a, b));
      // and the CUDA backend sums in the CPU backend's order: the same bits
      if (!dev.is_cpu())
        CHECK(same_bits(a, ops::embedding_backward(dy.to(Device::cpu()), tokens.to(Device::cpu()), num)));
    }
  }
}

// ---- indexing and shape ops ------------------------------------------------------------------

TEST_CASE("index_select, gather, scatter_add, cat, stack, masked_fill, tril, triu match references",
          "[kernels][index]") {
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(dev, dtype, "index ops"));
      const Tensor x = make_input({3, 4}, dtype, Domain::kAny, 31).to(dev);
      const std::vector<double> xv = values_of(x);
      // index_select on dim 1: x[:, [3, 0, 3]]
      {
        const std::vector<double> y = values_of(hg::index_select(x, 1, int_tensor({3, 0, 3}, {3}, dev)));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int k : {3, 0, 3}) want.push_back(xv[r * 4 + k]);
        }
        CHECK(y == want);
      }
      // gather on dim 1 with index [[1, 1], [0, 3], [2, 0]]
      const std::vector<int64_t> gi{1, 1, 0, 3, 2, 0};
      {
        const std::vector<double> y = values_of(hg::gather(x, 1, int_tensor(gi, {3, 2}, dev)));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int k = 0; k < 2; ++k) want.push_back(xv[r * 4 + gi[r * 2 + k]]);
        }
        CHECK(y == want);
      }
      // scatter_add on dim 1 of src [3, 2] into x
      {
        const Tensor src = make_input({3, 2}, dtype, Domain::kAny, 32).to(dev);
        const std::vector<double> sv = values_of(src);
        std::vector<double> want = xv;
        for (int r = 0; r < 3; ++r) {
          for (int k = 0; k < 2; ++k) want[r * 4 + gi[r * 2 + k]] += sv[r * 2 + k];
        }
        const Tensor y = hg::scatter_add(x, 1, int_tensor(gi, {3, 2}, dev), src);
        CHECK(compare_values(values_of(y), round_to(want, dtype), tolerance_for(dtype, OpKind::kElementwise)) == "");
      }
      // cat on dim 1 and stack on dim 0, the second input non-contiguous
      {
        const Tensor b = make_noncontiguous(make_input({3, 2}, dtype, Domain::kAny, 33).to(dev));
        const std::vector<double> bv = values_of(b);
        const std::vector<double> y = values_of(hg::cat({x, b}, 1));
        std::vector<double> want;
        for (int r = 0; r < 3; ++r) {
          for (int c = 0; c < 4; ++c) want.push_back(xv[r * 4 + c]);
          for (int c = 0; c < 2; ++c) want.push_back(bv[r * 2 + c]);
        }
        CHECK(y == want);
        const Tensor s = hg::stack({x, x}, 0);
        CHECK(s.sizes() == Shape{2, 3, 4});
        std::vector<double> twice = xv;
        twice.insert(twice.end(), xv.begin(), xv.end());
        CHECK(values_of(s) == twice);
        CHECK_THROWS_WITH(hg::cat({x, zeros({2, 2}, {.dtype = dtype, .device = dev})}, 1),
                          Contains("[3, 4]") && Contains("[2, 2]"));
      }
      // masked_fill with a broadcast [1, 4] mask; tril/triu with offsets
      {
        const Tensor mask = from_vector(std::vector<double>{1, 0, 0, 1}, {1, 4}).to(kBool).to(dev);
        const std::vector<double> y = values_of(hg::masked_fill(x, mask, -7.0));
        std::vector<double> want = xv;
        for (int r = 0; r < 3; ++r) want[r * 4] = want[r * 4 + 3] = -7.0;
        CHECK(y == want);
        for (int64_t k : {-1, 0, 2}) {
          std::vector<double> lo = xv, hi = xv;
          for (int r = 0; r < 3; ++r) {
            for (int c = 0; c < 4; ++c) {
              if (c - r > k) lo[r * 4 + c] = 0;
              if (c - r < k) hi[r * 4 + c] = 0;
            }
          }
          CHECK(values_of(hg::tril(x, k)) == lo);
          CHECK(values_of(hg::triu(x, k)) == hi);
        }
      }
    }
    // out of range, on the CPU at once and on CUDA at the next sync
    const Tensor x = zeros({3, 4}, {.device = dev});
    if (dev.is_cpu()) {
      CHECK_THROWS_WITH(hg::index_select(x, 0, int_tensor({3}, {1}, dev)), Contains("index_select") && Contains("3"));
      CHECK_THROWS_WITH(hg::gather(x, 1, int_tensor({4, 0, 0}, {3, 1}, dev)), Contains("gather"));
    } else {
#if defined(HG_WITH_CUDA)
      CHECK_THROWS_WITH(hg::gather(x, 1, int_tensor({4, 0, 0}, {3, 1}, dev)).to(Device::cpu()), Contains("gather"));
      CHECK_NOTHROW(hg::cuda::check_device_errors());
#endif
    }
  }
}

TEST_CASE("split and chunk make views along the dim", "[kernels][index]") {
  const Tensor x = arange(0, 10, 1, {.dtype = kF32}).reshape({10, 1});
  const std::vector<Tensor> s = hg::split(x, 4, 0);
  REQUIRE(s.size() == 3);
  CHECK(s[2].sizes() == Shape{2, 1});
  CHECK(values_of(s[2]) == std::vector<double>{8, 9});
  const std::vector<Tensor> c = hg::chunk(x, 3, 0);
  REQUIRE(c.size() == 3);
  CHECK(c[0].size(0) == 4);
  CHECK(c[2].size(0) == 2);
  CHECK_THROWS_AS(hg::split_with_sizes(x, {3, 3}, 0), Error);
}

TEST_CASE("arange fills on the device", "[kernels][index]") {
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kI64, kF16}) {
      const Tensor t = arange(-2, 5, 0.5, {.dtype = dtype, .device = dev});
      std::vector<double> want;
      for (int i = 0; i < 14; ++i) want.push_back(-2 + 0.5 * i);
      INFO(label(dev, dtype, "arange"));
      CHECK(values_of(t) == round_to(want, dtype));
    }
  }
}

// ---- autograd --------------------------------------------------------------------------------

TEST_CASE("gradcheck passes for the embedding and the indexing ops (f64, cpu)", "[autograd][gradcheck]") {
  const Device cpu = Device::cpu();
  const Tensor idx = int_tensor({2, 0, 2, 1}, {4}, cpu);
  const Tensor gidx = int_tensor({1, 1, 0, 3, 2, 0}, {3, 2}, cpu);
  const Tensor mask = from_vector(std::vector<double>{1, 0, 0, 1}, {4}).to(kBool);
  check_gradcheck({
      // (the padding row gets no gradient although the forward reads it, as in
      // torch, so finite differences disagree there by design; tested above)
      {"embedding",
       {{5, 3}},
       [idx](V x) {
         return hg::embedding(idx.reshape({2, 2}), x[0]);
       }},
      {"index_select dim 1", {{3, 4}}, [idx](V x) { return hg::index_select(x[0], 1, idx); }},
      {"gather dim 1", {{3, 4}}, [gidx](V x) { return hg::gather(x[0], 1, gidx); }},
      {"scatter_add", {{3, 4}, {3, 2}}, [gidx](V x) { return hg::scatter_add(x[0], 1, gidx, x[1]); }},
      {"cat dim 1",
       {{3, 4}, {3, 2}},
       [](V x) {
         return hg::cat({x[0], x[1] * 2.0}, 1);
       }},
      {"stack dim 2",
       {{3, 4}, {3, 4}},
       [](V x) {
         return hg::stack({x[0], x[1]}, 2);
       }},
      {"split",
       {{7, 3}},
       [](V x) {
         const auto parts = hg::split(x[0], 3, 0);
         return hg::cat({parts[2] * 3.0, parts[0]}, 0);
       }},
      {"chunk", {{4, 6}}, [](V x) { return hg::chunk(x[0], 2, 1)[1] * hg::chunk(x[0], 2, 1)[0]; }},
      {"masked_fill", {{3, 4}}, [mask](V x) { return hg::masked_fill(x[0], mask, 0.5); }},
      {"tril / triu", {{4, 5}}, [](V x) { return hg::tril(x[0], 1) + hg::triu(x[0], -1) * 2.0; }},
  });
}

TEST_CASE("member views record autograd", "[autograd][views]") {
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_(true);
  hg::sum(w.view({6}) * 2.0).backward();
  REQUIRE(w.grad().defined());
  CHECK(values_of(w.grad()) == std::vector<double>(6, 2.0));
  // every member, chained, against finite differences
  const auto chain = [](V x) {
    Tensor y = x[0].t().reshape({3, 2}).permute({1, 0}).unsqueeze(0).squeeze(0).narrow(1, 1, 2).slice(0, 0, 2, 1);
    y = y.transpose(0, 1).flatten().unsqueeze(1).expand({4, 3}).select(1, 2);
    return y * y;
  };
  CHECK(gradcheck(chain, {make_input({2, 3}, kF64, Domain::kAny, 71).requires_grad_(true)}) == "");
  // no recording without grad mode
  Tensor p = ones({2, 3}).requires_grad_(true);
  {
    NoGradGuard guard;
    CHECK_FALSE(p.view({6}).requires_grad());
  }
  CHECK(p.view({6}).requires_grad());
}

// ---- layers ----------------------------------------------------------------------------------

TEST_CASE("nn::Embedding", "[nn][embedding]") {
  Generator gen(3);
  nn::Embedding emb(6, 3, /*padding_idx=*/1, &gen);
  CHECK(values_of(emb.weight.select(0, 1)) == std::vector<double>(3, 0.0));  // like torch: the padding row is zero
  const Tensor e = emb.forward(int_tensor({1, 4, 4}, {3}, Device::cpu()));
  CHECK(e.sizes() == Shape{3, 3});
  hg::sum(e).backward();
  CHECK(values_of(emb.weight.grad().select(0, 4)) == std::vector<double>(3, 2.0));
  CHECK(values_of(emb.weight.grad().select(0, 1)) == std::vector<double>(3, 0.0));
}

// ---- PyTorch fixture ---------------------------------------------------------------------------

TEST_CASE("embedding, cat, gather, index_select match PyTorch", "[kernels][torch]") {
  check_seq_fixture({
      {"embedding", [](auto& in, auto& ints) { return hg::embedding(ints["idx"], in["w"], /*padding_idx=*/1); }},
      {"cat",
       [](auto& in, auto&) {
         return hg::cat({in["a"], in["b"]}, 1);
       }},
      {"gather", [](auto& in, auto& ints) { return hg::gather(in["x"], 1, ints["idx"]); }},
      {"index_select", [](auto& in, auto& ints) { return hg::index_select(in["x"], 0, ints["idx"]); }},
  });
}
