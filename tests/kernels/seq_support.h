// Helpers shared by tests/kernels/test_norm.cpp and tests/kernels/test_index.cpp:
// integer index tensors, a bit-equality check, the gradcheck case runner and
// the PyTorch fixture runner (fixtures/seq_reference.json, written by
// fixtures/make_seq_fixture.py).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "tests/kernels/test_support.h"

namespace hg::test {

using V = const std::vector<Tensor>&;

inline Tensor int_tensor(const std::vector<int64_t>& v, const Shape& shape, Device device) {
  return from_vector(v, shape, {.dtype = kI64}).to(device);
}

// Two tensors hold the same values, bit for bit (compared as doubles).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  if (x.sizes() != y.sizes() || x.dtype() != y.dtype()) return false;
  const std::vector<double> u = x.to_vector<double>(), v = y.to_vector<double>();
  return std::memcmp(u.data(), v.data(), u.size() * sizeof(double)) == 0;
}

// One gradcheck case: f64 inputs of the given shapes (seeded from 51 on) and
// the function of them.
struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(V)> fn;
};

inline void check_gradcheck(const std::vector<GradCase>& cases) {
  for (const GradCase& c : cases) {
    std::vector<Tensor> in;
    uint64_t seed = 51;
    for (const Shape& s : c.shapes) in.push_back(make_input(s, kF64, Domain::kAny, seed++).requires_grad_(true));
    INFO(c.name);
    CHECK(gradcheck(c.fn, in) == "");
  }
}

// The named cases of the fixture on every device in f64 and f32: the output
// and the gradient of every input. f64 agrees to the f64 row, f32 to the f32
// reduction row (each output and gradient is one short row reduction of
// rounded inputs).
using SeqRun = std::function<Tensor(std::map<std::string, Tensor>&, std::map<std::string, Tensor>&)>;
inline void check_seq_fixture(const std::vector<std::pair<std::string, SeqRun>>& runs) {
  std::ifstream file(std::string(HG_TEST_FIXTURE_DIR) + "/seq_reference.json");
  REQUIRE(file.good());
  const nlohmann::json fx = nlohmann::json::parse(file);
  for (Device dev : test_devices()) {
    for (DType dt : {kF64, kF32}) {
      for (const auto& [name, run] : runs) {
        const nlohmann::json& c = fx[name];
        std::map<std::string, Tensor> in, ints;
        for (const auto& [n, j] : c["inputs"].items()) {
          in[n] = from_vector(j["values"].get<std::vector<double>>(), j["shape"].get<Shape>(), {.dtype = dt})
                      .to(dev)
                      .requires_grad_(true);
        }
        for (const auto& [n, j] : c["ints"].items()) {
          ints[n] = from_vector(j["values"].get<std::vector<int64_t>>(), j["shape"].get<Shape>()).to(dev);
        }
        Tensor out = run(in, ints);
        INFO(label(dev, dt, name));
        REQUIRE(out.sizes() == c["out"]["shape"].get<Shape>());
        const Tolerance tol = tolerance_for(dt, OpKind::kReduction);
        CHECK(compare_values(values_of(out), c["out"]["values"].get<std::vector<double>>(), tol) == "");
        const Tensor d_out = from_vector(c["d_out"].get<std::vector<double>>(), out.sizes(), {.dtype = dt}).to(dev);
        out.backward(d_out);
        for (auto& [n, t] : in) {
          INFO("grad of " << n);
          CHECK(compare_values(values_of(t.grad()), c["grads"][n].get<std::vector<double>>(), tol) == "");
        }
      }
    }
  }
}

}  // namespace hg::test
