// Random fills: same seed gives bit-identical tensors on every device; the
// uniform fill agrees with core's hg::rand; the distributions have the right
// moments (6-sigma bounds computed from the sample size).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/generator.h"
#include "kernels/random/random.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

struct Moments {
  double mean = 0, var = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

}  // namespace

TEST_CASE("random fills are bit-identical across devices", "[kernels][random]") {
  for (DType dt : float_dtypes()) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<std::vector<double>> results;
      for (Device dev : test_devices()) {
        Generator gen(2024);
        Tensor t = empty({3, 1001}, {.dtype = dt, .device = dev});
        if (kind == 0) ops::uniform_(t, -2.0, 5.0, &gen);
        if (kind == 1) ops::normal_(t, 1.5, 0.5, &gen);
        if (kind == 2) ops::bernoulli_(t, 0.3, &gen);
        CHECK(gen.offset() == 1);
        results.push_back(values_of(t));
      }
      INFO(dtype_name(dt) << " kind " << kind);
      for (size_t i = 1; i < results.size(); ++i) CHECK(results[i] == results[0]);
    }
  }
}

TEST_CASE("uniform_ on f32 reproduces hg::rand", "[kernels][random]") {
  Generator g1(7), g2(7);
  Tensor a = rand({999}, {}, &g1);
  Tensor b = empty({999});
  ops::uniform_(b, 0.0, 1.0, &g2);
  CHECK(values_of(a) == values_of(b));
}

TEST_CASE("random fills have the right distributions", "[kernels][random]") {
  for (Device dev : test_devices()) {
    const int64_t n = 40000;
    Generator gen(99);
    Tensor u = empty({n}, {.device = dev});
    ops::uniform_(u, -1.0, 3.0, &gen);
    const auto uv = values_of(u);
    for (double x : uv) {
      CHECK(x >= -1.0);
      CHECK(x < 3.0);
    }
    const Moments mu = moments(uv);
    const double u_sd = 4.0 / std::sqrt(12.0);
    CHECK(std::fabs(mu.mean - 1.0) < 6 * u_sd / std::sqrt(double(n)));
    CHECK(std::fabs(mu.var - u_sd * u_sd) < 0.05 * u_sd * u_sd);

    Tensor z = empty({n}, {.device = dev});
    ops::normal_(z, -2.0, 3.0, &gen);
    const Moments mz = moments(values_of(z));
    CHECK(std::fabs(mz.mean + 2.0) < 6 * 3.0 / std::sqrt(double(n)));
    CHECK(std::fabs(std::sqrt(mz.var) - 3.0) < 0.05 * 3.0);

    Tensor bits = empty({n}, {.dtype = kBool, .device = dev});
    ops::bernoulli_(bits, 0.25, &gen);
    const Moments mb = moments(values_of(bits));
    CHECK(std::fabs(mb.mean - 0.25) < 6 * std::sqrt(0.25 * 0.75 / double(n)));
  }
}

TEST_CASE("random fills write through strided views only", "[kernels][random]") {
  for (Device dev : test_devices()) {
    Tensor t = zeros({4, 6}, {.device = dev});
    Tensor col = t.select(1, 3);
    const uint64_t v0 = t.version();
    ops::uniform_(col, 1.0, 2.0);
    CHECK(t.version() > v0);
    const auto v = values_of(t);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 6; ++c) {
        const double x = v[static_cast<size_t>(r * 6 + c)];
        if (c == 3) {
          CHECK(x >= 1.0);
        } else {
          CHECK(x == 0.0);
        }
      }
    }
  }
}

TEST_CASE("random fills reject bad arguments", "[kernels][random][errors]") {
  Tensor t = empty({4});
  CHECK_THROWS_WITH(ops::uniform_(t, 2.0, 1.0), Catch::Contains("low <= high"));
  CHECK_THROWS_WITH(ops::normal_(t, 0.0, -1.0), Catch::Contains("std >= 0"));
  CHECK_THROWS_WITH(ops::bernoulli_(t, 1.5), Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(ops::uniform_(empty({4}, {.dtype = kI32})), Catch::Contains("floating"));
}
