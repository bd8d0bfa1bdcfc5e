// Values and gradients checked against PyTorch: a micrograd-style scalar
// expression and a 2-layer MLP with cross-entropy (label smoothing). The
// fixture was written by fixtures/make_torch_fixture.py (float64); this test
// needs no Python. f64 on the CPU must agree to ~1e-12; every device in f32
// must agree within the documented override below.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

nlohmann::json load_fixture() {
  const std::string path = std::string(HG_TEST_FIXTURE_DIR) + "/torch_reference.json";
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

Shape shape_of(const nlohmann::json& j) { return j.get<Shape>(); }

}  // namespace

TEST_CASE("micrograd expression matches PyTorch", "[autograd][torch]") {
  const auto fx = load_fixture()["expression"];
  for (Device dev : test_devices()) {
    for (DType dt : {kF64, kF32}) {
      Tensor a = full({}, fx["a"].get<double>(), {.dtype = dt, .device = dev}).requires_grad_(true);
      Tensor b = full({}, fx["b"].get<double>(), {.dtype = dt, .device = dev}).requires_grad_(true);
      Tensor c = a + b;
      Tensor d = a * b + hg::pow(b, 3.0);
      c = c + c + 1.0;
      c = c + 1.0 + c + (-a);
      d = d + d * 2.0 + hg::relu(b + a);
      d = d + 3.0 * d + hg::relu(b - a);
      Tensor e = c - d;
      Tensor f = hg::pow(e, 2.0);
      Tensor g = f / 2.0;
      g = g + 10.0 * hg::pow(f, -1.0);
      g.backward();
      // f64: the table's f64 row (rtol 1e-12), as the header claims.
      const double tol = dt == kF64 ? tolerance_for(kF64, OpKind::kElementwise).rtol : 1e-5;
      INFO(label(dev, dt, "expression"));
      CHECK(g.item<double>() == Approx(fx["g"].get<double>()).epsilon(tol));
      CHECK(a.grad().item<double>() == Approx(fx["a_grad"].get<double>()).epsilon(tol));
      CHECK(b.grad().item<double>() == Approx(fx["b_grad"].get<double>()).epsilon(tol));
    }
  }
}

TEST_CASE("2-layer MLP loss and gradients match PyTorch", "[autograd][torch]") {
  const auto fx = load_fixture()["mlp"];
  const std::vector<std::string> names{"x", "w1", "b1", "w2", "b2"};
  for (Device dev : test_devices()) {
    for (DType dt : {kF64, kF32}) {
      std::map<std::string, Tensor> p;
      for (const std::string& n : names) {
        p[n] = from_vector(fx["values"][n].get<std::vector<double>>(), shape_of(fx["shapes"][n]), {.dtype = dt})
                   .to(dev)
                   .requires_grad_(true);
      }
      const Tensor targets = from_vector(fx["targets"].get<std::vector<int64_t>>()).to(dev);
      const Tensor hidden = hg::gelu(hg::linear(p["x"], p["w1"], p["b1"]));
      const Tensor logits = hg::linear(hidden, p["w2"], p["b2"]);
      const Tensor loss = hg::cross_entropy(logits, targets, -100, fx["label_smoothing"].get<double>());
      loss.backward();
      // f32 against an f64 reference through two layers: errors compound past
      // the elementwise f32 row, so this comparison uses rtol 1e-4, atol 1e-6.
      // f64 uses the table's f64 row (rtol 1e-12, atol 1e-12), as the header claims.
      const Tolerance tol = dt == kF64 ? tolerance_for(kF64, OpKind::kReduction) : Tolerance{1e-4, 1e-6};
      INFO(label(dev, dt, "mlp"));
      CHECK(compare_values(values_of(logits), fx["logits"].get<std::vector<double>>(), tol) == "");
      CHECK(compare_values({loss.item<double>()}, {fx["loss"].get<double>()}, tol) == "");
      for (const std::string& n : names) {
        INFO("grad of " << n);
        CHECK(compare_values(values_of(p[n].grad()), fx["grads"][n].get<std::vector<double>>(), tol) == "");
      }
    }
  }
}
