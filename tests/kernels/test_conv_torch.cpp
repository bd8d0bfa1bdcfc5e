// conv2d, pooling and BatchNorm2d against PyTorch: forward outputs and input,
// weight and bias gradients, and BatchNorm2d's running statistics after three
// training steps and its eval output. The fixture was written by
// fixtures/make_conv_fixture.py (float64); this test needs no Python. f64 is
// held to the f64 row of tests/kernels/tolerance.h, f32 to the f32 row
// (OpKind::kReduction), on every device of test_devices(): the CPU, and
// cuda:0 in the emu/gpu builds (cuDNN or its cuda-emu stand-ins for conv, the
// kernels of kernels/conv/pool_norm.cu for pooling and BatchNorm2d).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/conv.h"
#include "tests/kernels/test_support.h"
#include "tests/kernels/tolerance.h"

using namespace hg;
using namespace hg::test;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(HG_KERNEL_FIXTURE_DIR) + "/conv_torch.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return j;
}

Tensor load(const nlohmann::json& j, DType dt, bool grad = false, Device dev = Device::cpu()) {
  Tensor t =
      from_vector(j["values"].get<std::vector<double>>(), j["shape"].get<Shape>(), {.dtype = kF64}).to(dt).to(dev);
  if (grad) t.requires_grad_(true);
  return t;
}

std::string compare(const Tensor& actual, const nlohmann::json& expected, DType dt) {
  // f32: the inputs were rounded to f32 first, so compare with the f32 row.
  return compare_values(values_of(actual.to(Device::cpu()).contiguous()), expected["values"].get<std::vector<double>>(),
                        tolerance_for(dt, OpKind::kReduction));
}

std::array<int64_t, 2> pair(const nlohmann::json& j) { return {j[0].get<int64_t>(), j[1].get<int64_t>()}; }

}  // namespace

TEST_CASE("conv2d matches PyTorch: outputs and gradients", "[kernels][conv][torch]") {
  for (Device dev : test_devices()) {
    for (const char* name : {"conv_groups", "conv_same", "conv_depthwise"}) {
      const auto& f = fixture()[name];
      for (DType dt : {kF64, kF32}) {
        for (bool cl : {false, true}) {
          INFO(dev << " " << name << " " << dtype_name(dt) << (cl ? " NHWC" : " NCHW"));
          Tensor x = load(f["x"], dt, false, dev);
          if (cl) x = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
          x.requires_grad_(true);
          Tensor w = load(f["w"], dt, true, dev), b = load(f["b"], dt, true, dev);
          Conv2dOptions o{
              .stride = pair(f["stride"]), .dilation = pair(f["dilation"]), .groups = f["groups"].get<int64_t>()};
          if (f["padding"].is_string()) {
            o.padding_same = true;
          } else {
            o.padding = pair(f["padding"]);
          }
          Tensor y = hg::conv2d(x, w, b, o);
          CHECK(compare(y, f["y"], dt) == "");
          y.backward(load(f["gy"], dt, false, dev));
          CHECK(compare(x.grad(), f["gx"], dt) == "");
          CHECK(compare(w.grad(), f["gw"], dt) == "");
          CHECK(compare(b.grad(), f["gb"], dt) == "");
        }
      }
    }
  }
}

TEST_CASE("pooling matches PyTorch: outputs and gradients", "[kernels][pool][torch]") {
  const auto& fx = fixture();
  for (Device dev : test_devices())
    for (DType dt : {kF64, kF32}) {
      INFO(dev << " " << dtype_name(dt));
      for (const char* name : {"max_pool", "max_pool_dilated", "avg_pool", "adaptive_avg_pool"}) {
        INFO(name);
        const auto& f = fx[name];
        Tensor x = load(f["x"], dt, true, dev);
        Tensor y;
        const std::string n = name;
        if (n == "adaptive_avg_pool") {
          y = hg::adaptive_avg_pool2d(x, pair(f["output_size"]));
        } else {
          const int64_t k = f["kernel"], s = f["stride"], p = f["padding"];
          y = n == "avg_pool"
                  ? hg::avg_pool2d(x, {k, k}, {s, s}, {p, p}, f["ceil_mode"], f["count_include_pad"])
                  : hg::max_pool2d(x, {k, k}, {s, s}, {p, p}, {f["dilation"], f["dilation"]}, f["ceil_mode"]);
        }
        CHECK(compare(y, f["y"], dt) == "");
        y.backward(load(f["gy"], dt, false, dev));
        CHECK(compare(x.grad(), f["gx"], dt) == "");
      }
    }
}

TEST_CASE("BatchNorm2d matches PyTorch: 3 training steps, gradients, running stats, eval",
          "[kernels][batchnorm][torch]") {
  const auto& f = fixture()["batch_norm"];
  for (Device dev : test_devices())
    for (DType dt : {kF64, kF32}) {
      INFO(dev << " " << dtype_name(dt));
      nn::BatchNorm2d bn(3);
      bn.to(dt);
      bn.to(dev);
      {
        NoGradGuard no_grad;
        bn.weight.copy_(load(f["weight"], dt, false, dev));
        bn.bias.copy_(load(f["bias"], dt, false, dev));
      }
      Tensor y, x;
      for (int i = 0; i < 3; ++i) {
        x = load(f["xs"][i], dt, true, dev);
        y = bn.forward(x);
      }
      CHECK(compare(y, f["y"], dt) == "");
      y.backward(load(f["gy"], dt, false, dev));
      CHECK(compare(x.grad(), f["gx"], dt) == "");
      CHECK(compare(bn.weight.grad(), f["gw"], dt) == "");
      CHECK(compare(bn.bias.grad(), f["gb"], dt) == "");
      CHECK(compare(bn.running_mean, f["running_mean"], dt) == "");
      CHECK(compare(bn.running_var, f["running_var"], dt) == "");
      CHECK(bn.num_batches_tracked.to(Device::cpu()).item<int64_t>() == 3);
      bn.eval();
      CHECK(compare(bn.forward(load(f["x_eval"], dt, false, dev)), f["y_eval"], dt) == "");
    }
}
