// The fp8 recipe (Note [fp8 recipe] in amp/fp8.h): slots and formats, delayed
// and current scaling through fp8_linear_forward, the skipped overflow step,
// and no host syncs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "amp/fp8.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Contains;

namespace {

std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
#if defined(HG_WITH_CUDA)
  d.push_back(Device::cuda(0));
#endif
  return d;
}

float host_scalar(const Tensor& t) { return t.to(Device::cpu()).item<float>(); }

float amax_of(const Tensor& t) {
  double m = 0;
  for (double v : t.to(Device::cpu()).to(kF64).to_vector<double>()) m = std::max(m, std::fabs(v));
  return static_cast<float>(m);
}

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to(kF64).to_vector<double>(); }

}  // namespace

TEST_CASE("Fp8State: slots, formats and bad arguments", "[amp][fp8]") {
  amp::Fp8State hybrid(2, {.format = amp::Fp8Format::hybrid, .amax_history_len = 4}, Device::cpu());
  CHECK(hybrid.dtype(amp::Fp8Role::input) == kF8E4M3);
  CHECK(hybrid.dtype(amp::Fp8Role::weight) == kF8E4M3);
  CHECK(hybrid.dtype(amp::Fp8Role::grad_output) == kF8E5M2);
  CHECK(hybrid.slot(1, amp::Fp8Role::grad_output) == 5);
  CHECK(hybrid.history().sizes() == Shape({4, 6}));
  CHECK(values(hybrid.scales()) == std::vector<double>(6, 1.0));
  amp::Fp8State e4m3(1, {.format = amp::Fp8Format::e4m3}, Device::cpu());
  CHECK(e4m3.dtype(amp::Fp8Role::grad_output) == kF8E4M3);
  CHECK_THROWS_WITH(hybrid.slot(2, amp::Fp8Role::input), Contains("outside [0, 2)"));
  CHECK_THROWS_WITH(amp::Fp8State(1, {.amax_history_len = 0}, Device::cpu()), Contains("amax_history_len"));
}

TEST_CASE("Fp8State delayed scaling: casts record amax, update derives the next scales", "[amp][fp8]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    amp::Fp8State fp8(1, {.amax_history_len = 3, .margin = 1}, dev);
    const Tensor w = make_input({32, 48}, kF32, Domain::kAny, 1).to(dev);
    const Tensor bias = make_input({32}, kF32, Domain::kAny, 2).to(dev);
    float w_max_seen = 0;
    std::vector<float> x_amax;
    for (int step = 0; step < 5; ++step) {
      INFO("step " << step);
      const double magnitude = std::ldexp(1.0, step);  // the inputs grow: the scales must follow
      const Tensor x =
          ops::binary_scalar(OpId::mul, make_input({2, 5, 48}, kF32, Domain::kAny, 10 + step).to(dev), magnitude);
      const float sx = host_scalar(fp8.scale(0, amp::Fp8Role::input));
      const float sw = host_scalar(fp8.scale(0, amp::Fp8Role::weight));
      const Tensor y = amp::fp8_linear_forward(x, w, bias, fp8, 0, kBF16);
      CHECK(y.sizes() == Shape({2, 5, 32}));
      // The same product by hand from the step's scales: the recipe adds nothing else.
      const Tensor scratch = zeros({1}, {.device = dev});
      const Tensor sxt = from_vector(std::vector<float>{sx}).to(dev), swt = from_vector(std::vector<float>{sw}).to(dev);
      const Tensor want =
          ops::fp8_linear(ops::fp8_cast(x.reshape({10, 48}), kF8E4M3, sxt, scratch),
                          ops::fp8_cast(w, kF8E4M3, swt, scratch), from_vector(std::vector<float>{1.0f / sx}).to(dev),
                          from_vector(std::vector<float>{1.0f / sw}).to(dev), kBF16, bias.to(kBF16));
      CHECK(values(y.reshape({10, 32})) == values(want));
      // Row 0 of the history holds this step's amaxes.
      CHECK(host_scalar(fp8.amax(0, amp::Fp8Role::input)) == amax_of(x));
      CHECK(host_scalar(fp8.amax(0, amp::Fp8Role::weight)) == amax_of(w));
      x_amax.push_back(amax_of(x));
      w_max_seen = amax_of(w);
      const bool overflow = step == 3;
      fp8.update(from_vector(std::vector<float>{overflow ? 1.0f : 0.0f}).to(dev));
      if (overflow) {
        x_amax.pop_back();  // the skipped step leaves no trace: its amax is overwritten next step
        CHECK(host_scalar(fp8.scale(0, amp::Fp8Role::input)) == sx);
        continue;
      }
      // scale = 448 / max(amax over the last 3 recorded steps) / 2^margin.
      const size_t from = x_amax.size() > 3 ? x_amax.size() - 3 : 0;
      const float window = *std::max_element(x_amax.begin() + static_cast<std::ptrdiff_t>(from), x_amax.end());
      CHECK(host_scalar(fp8.scale(0, amp::Fp8Role::input)) == (448.0f / window) / 2.0f);
      CHECK(host_scalar(fp8.scale_inv(0, amp::Fp8Role::input)) == 1.0f / ((448.0f / window) / 2.0f));
      CHECK(host_scalar(fp8.scale(0, amp::Fp8Role::weight)) == (448.0f / w_max_seen) / 2.0f);
      // No gradient cast ran: that slot's amax stayed 0 and its scale at 1.
      CHECK(host_scalar(fp8.scale(0, amp::Fp8Role::grad_output)) == 1.0f);
    }
  }
}

TEST_CASE("Fp8State current scaling: the cast's own amax sets its scale", "[amp][fp8]") {
  for (const Device dev : devices()) {
    INFO(dev.str());
    amp::Fp8State fp8(2, {.format = amp::Fp8Format::hybrid, .scaling = amp::Fp8Scaling::current}, dev);
    const Tensor g = ops::binary_scalar(OpId::mul, make_input({16, 32}, kBF16, Domain::kAny, 3).to(dev), 1e-3);
    const Tensor q = fp8.cast(g, 1, amp::Fp8Role::grad_output);
    CHECK(q.dtype() == kF8E5M2);
    const float s = host_scalar(fp8.scale(1, amp::Fp8Role::grad_output));
    CHECK(s == 57344.0f / amax_of(g));
    // The largest element lands on the format's largest value, none saturates beyond it.
    CHECK(amax_of(q.to(kF32)) == 57344.0f);
    // Other slots kept their scales.
    CHECK(host_scalar(fp8.scale(0, amp::Fp8Role::input)) == 1.0f);
    fp8.update();  // nothing to do for current scaling
    CHECK(host_scalar(fp8.scale(1, amp::Fp8Role::grad_output)) == s);
  }
}

#if defined(HG_WITH_CUDA)
TEST_CASE("Fp8State steps make no host read or sync", "[amp][fp8]") {
  const Device dev = Device::cuda(0);
  amp::Fp8State fp8(1, {.amax_history_len = 16}, dev);
  const Tensor w = make_input({32, 64}, kBF16, Domain::kAny, 1).to(dev);
  const Tensor x = make_input({8, 64}, kBF16, Domain::kAny, 2).to(dev);
  const Tensor found = zeros({1}, {.device = dev});
  cuda::synchronize(0);
  const cuda::HostSyncCounts before = cuda::host_sync_counts();
  for (int step = 0; step < 3; ++step) {
    (void)amp::fp8_linear_forward(x, w, Tensor(), fp8, 0, kBF16);
    fp8.update(found);
  }
  const cuda::HostSyncCounts after = cuda::host_sync_counts();
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.synchronizations == before.synchronizations);
}
#endif
