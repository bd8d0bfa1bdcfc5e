// hg::profiler (core/profiler.h): a small model under a Profile on every
// device the build has (cpu; cuda-emu or a GPU): ops with their kernels,
// declared work of an element-wise add and a GEMM against the formulas,
// nesting, the Chrome trace, the modelled time recomputed here, no host sync
// per launch, count-only mode on cuda-emu.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/profiler.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using hg::Device;
using hg::Tensor;
namespace profiler = hg::profiler;
using profiler::Kind;
using profiler::Record;

namespace {

struct Model {
  Tensor w1, b1, w2;
};

Model make_model(Device d, int64_t in, int64_t hidden, int64_t out) {
  hg::Generator gen(3);
  Model m;
  m.w1 = hg::randn({in, hidden}, {.device = d}, &gen).requires_grad_();
  m.b1 = hg::randn({hidden}, {.device = d}, &gen).requires_grad_();
  m.w2 = hg::randn({hidden, out}, {.device = d}, &gen).requires_grad_();
  return m;
}

// matmul -> add (bias) -> relu -> matmul -> sum, and its backward.
void step(const Model& m, const Tensor& x) {
  Tensor h = hg::relu(hg::add(hg::matmul(x, m.w1), m.b1));
  Tensor loss = hg::sum(hg::matmul(h, m.w2));
  loss.backward();
}

bool is_work(const Record& r) { return profiler::is_work(r.kind); }

// The op records named `name` of `kind`, and the work records directly under each.
std::vector<std::pair<int, std::vector<int>>> ops_named(const std::vector<Record>& rs, const std::string& name,
                                                        Kind kind) {
  std::vector<std::pair<int, std::vector<int>>> out;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].kind != kind || rs[i].name != name) continue;
    std::vector<int> children;
    for (size_t j = i + 1; j < rs.size(); ++j) {
      if (rs[j].parent == static_cast<int>(i) && is_work(rs[j])) children.push_back(static_cast<int>(j));
    }
    out.emplace_back(static_cast<int>(i), children);
  }
  return out;
}

}  // namespace

TEST_CASE("profiler records every op with its kernels, declared work and nesting", "[profiler]") {
  for (const Device d : hg::test::test_devices()) {
    CAPTURE(d.str());
    const int64_t B = 4, IN = 8, H = 16, OUT = 3;
    const Model m = make_model(d, IN, H, OUT);
    hg::Generator gen(5);
    const Tensor x = hg::randn({B, IN}, {.device = d}, &gen);
    step(m, x);  // warm-up: caches, handles

    profiler::Profile prof;
    CHECK(profiler::active());
    step(m, x);
    prof.stop();
    CHECK_FALSE(profiler::active());
    const std::vector<Record>& rs = prof.records();
    REQUIRE(!rs.empty());

    // Every forward op and every backward node appears, each with a kernel.
    for (const char* op : {"matmul", "add", "relu", "sum"}) {
      CAPTURE(op);
      const auto found = ops_named(rs, op, Kind::op);
      REQUIRE(!found.empty());
      for (const auto& [index, kernels] : found) CHECK(!kernels.empty());
      // The input shapes are recorded.
      CHECK(rs[static_cast<size_t>(found.front().first)].inputs.find("f32[") != std::string::npos);
    }
    for (const char* node : {"matmul", "add", "relu", "sum"}) {
      CAPTURE(node);
      const auto found = ops_named(rs, node, Kind::backward);
      REQUIRE(!found.empty());
    }
    // Two forward GEMMs, each declaring 2 M N K FLOPs.
    std::vector<double> gemm_flops;
    for (const auto& [index, kernels] : ops_named(rs, "matmul", Kind::op)) {
      for (const int k : kernels) {
        if (rs[static_cast<size_t>(k)].flops > 0) gemm_flops.push_back(rs[static_cast<size_t>(k)].flops);
      }
    }
    std::sort(gemm_flops.begin(), gemm_flops.end());
    REQUIRE(gemm_flops.size() == 2);
    CHECK(gemm_flops[0] == 2.0 * B * H * OUT);
    CHECK(gemm_flops[1] == 2.0 * B * IN * H);

    // Nesting: a work record sits inside its op's host interval, one level down;
    // every kernel of the step belongs to some op (or range).
    for (const Record& r : rs) {
      if (r.parent < 0) {
        CHECK(r.depth == 0);
        continue;
      }
      const Record& p = rs[static_cast<size_t>(r.parent)];
      CHECK_FALSE(is_work(p));
      CHECK(r.depth == p.depth + 1);
      CHECK(r.begin_us >= p.begin_us);
      CHECK(r.end_us <= p.end_us);
      CHECK(r.end_us >= r.begin_us);
      if (is_work(r)) CHECK(r.time_us() >= 0);
    }
    if (d.is_cuda()) {  // kernels carry their launch shape and a device time
      bool saw_kernel = false;
      for (const Record& r : rs) {
        if (r.kind != Kind::kernel) continue;
        saw_kernel = true;
        CHECK(r.grid[0] >= 1);
        CHECK(r.block[0] >= 1);
        CHECK(r.device_begin_us >= 0);
        CHECK(r.device_end_us >= r.device_begin_us);
      }
      CHECK(saw_kernel);
    }
  }
}

TEST_CASE("profiler: an element-wise add of N f32 values declares 12 N bytes", "[profiler]") {
  for (const Device d : hg::test::test_devices()) {
    CAPTURE(d.str());
    const int64_t n = 1000;
    const Tensor a = hg::ones({n}, {.device = d}), b = hg::ones({n}, {.device = d});
    profiler::Profile prof;
    const Tensor c = hg::add(a, b);
    prof.stop();
    const auto found = ops_named(prof.records(), "add", Kind::op);
    REQUIRE(found.size() == 1);
    REQUIRE(found[0].second.size() == 1);
    const Record& k = prof.records()[static_cast<size_t>(found[0].second[0])];
    CHECK(k.bytes == 12.0 * n);
    CHECK(k.kind == (d.is_cpu() ? Kind::cpu_kernel : Kind::kernel));
  }
}

TEST_CASE("profiler: a GEMM declares 2 M N K FLOPs and the bytes of A, B and C", "[profiler]") {
  for (const Device d : hg::test::test_devices()) {
    CAPTURE(d.str());
    const int64_t M = 5, K = 7, N = 3;
    const Tensor a = hg::ones({M, K}, {.device = d}), b = hg::ones({K, N}, {.device = d});
    profiler::Profile prof;
    const Tensor c = hg::matmul(a, b);
    prof.stop();
    const auto found = ops_named(prof.records(), "matmul", Kind::op);
    REQUIRE(found.size() == 1);
    REQUIRE(found[0].second.size() == 1);
    const Record& k = prof.records()[static_cast<size_t>(found[0].second[0])];
    CHECK(k.flops == 2.0 * M * N * K);
    CHECK(k.bytes == 4.0 * (M * K + K * N + M * N));
    CHECK(k.kind == (d.is_cpu() ? Kind::cpu_kernel : Kind::library));
  }
}

TEST_CASE("profiler: the Chrome trace parses and its begin/end events match", "[profiler]") {
  for (const Device d : hg::test::test_devices()) {
    CAPTURE(d.str());
    const Model m = make_model(d, 6, 10, 2);
    hg::Generator gen(9);
    const Tensor x = hg::randn({3, 6}, {.device = d}, &gen);
    profiler::Profile prof;
    {
      const profiler::Range range("train step");
      step(m, x);
    }
    prof.stop();
    const nlohmann::json trace = nlohmann::json::parse(prof.trace_json());
    REQUIRE(trace.contains("traceEvents"));
    std::vector<std::string> stack;
    int begins = 0, ends = 0, complete = 0;
    double last_ts = -1;
    for (const auto& e : trace["traceEvents"]) {
      const std::string ph = e["ph"];
      if (ph == "B") {
        ++begins;
        stack.push_back(e["name"]);
        CHECK(e["ts"].get<double>() >= last_ts);
        last_ts = e["ts"].get<double>();
      } else if (ph == "E") {
        ++ends;
        REQUIRE(!stack.empty());  // an end closes an open begin
        stack.pop_back();
        CHECK(e["ts"].get<double>() >= last_ts);
        last_ts = e["ts"].get<double>();
      } else if (ph == "X") {
        ++complete;
        CHECK(e["dur"].get<double>() >= 0);
        CHECK(e["args"].contains("bytes"));
        CHECK(e["args"].contains("grid"));
      }
    }
    CHECK(stack.empty());
    CHECK(begins == ends);
    int ops = 0, work = 0;
    for (const Record& r : prof.records()) (is_work(r) ? work : ops) += 1;
    CHECK(begins == ops);
    CHECK(complete == work);
    CHECK(trace["traceEvents"].size() > 2);
  }
}

TEST_CASE("profiler: the modelled time is max(bytes / bandwidth, FLOPs / peak) + launch, summed", "[profiler]") {
  const Device d = Device::cpu();
  const Tensor a = hg::ones({64, 32}, {.device = d}), b = hg::ones({32, 16}, {.device = d});
  profiler::Profile prof;
  const Tensor c = hg::relu(hg::matmul(a, b));
  prof.stop();
  const profiler::GpuSpec spec{"test", 100.0, 2.0, 5.0, "test"};
  double expect = 0, bytes = 0, flops = 0;
  int64_t launches = 0;
  for (const Record& r : prof.records()) {
    if (!is_work(r)) continue;
    ++launches;
    const double rb = std::max(r.bytes, 0.0), rf = std::max(r.flops, 0.0);
    bytes += rb;
    flops += rf;
    expect += std::max(rb / 2.0e12, rf / 100.0e12) * 1e6 + 5.0;
  }
  const profiler::Model model = prof.model(spec);
  CHECK(model.launches == launches);
  CHECK(model.bytes == bytes);
  CHECK(model.flops == flops);
  CHECK(std::abs(model.total_us - expect) <= 1e-9 * expect);
  CHECK(model.table.find("modelled on test") != std::string::npos);
  CHECK(prof.table().find("by kernel") != std::string::npos);
  // The device table has the named GPUs; an unknown name says which exist.
  CHECK(profiler::gpu_spec("h200").hbm_tbps == 4.0);
  CHECK(profiler::gpu_spec("A100").bf16_tflops > 0);
  CHECK_THROWS_AS(profiler::gpu_spec("Z80"), hg::Error);
}

TEST_CASE("profiler: off, nothing records; one Profile per thread", "[profiler]") {
  CHECK_FALSE(profiler::active());
  profiler::declare_work(100, 100);  // a no-op without a Profile
  profiler::Profile prof;
  CHECK_THROWS_AS(profiler::Profile(), hg::Error);
  prof.stop();
  const size_t n = prof.records().size();
  const Tensor c = hg::add(hg::ones({4}), hg::ones({4}));
  CHECK(prof.records().size() == n);
}

#if defined(HG_WITH_CUDA)
TEST_CASE("profiler adds no host sync per launch on CUDA", "[profiler]") {
  const Device d = Device::cuda(0);
  const Model m = make_model(d, 8, 32, 4);
  hg::Generator gen(11);
  const Tensor x = hg::randn({16, 8}, {.device = d}, &gen);
  step(m, x);
  hg::cuda::synchronize();
  const auto before_off = hg::cuda::host_sync_counts();
  for (int i = 0; i < 3; ++i) step(m, x);
  const auto after_off = hg::cuda::host_sync_counts();
  profiler::Profile prof;
  for (int i = 0; i < 3; ++i) step(m, x);
  const auto after_on_before_stop = hg::cuda::host_sync_counts();
  prof.stop();
  int64_t launches = 0;
  for (const Record& r : prof.records()) launches += r.kind == Kind::kernel || r.kind == Kind::library;
  CHECK(launches > 20);
  // The same steps make the same syncs with and without the profiler ...
  CHECK(after_on_before_stop.synchronizations - after_off.synchronizations ==
        after_off.synchronizations - before_off.synchronizations);
  CHECK(after_on_before_stop.device_to_host_copies - after_off.device_to_host_copies ==
        after_off.device_to_host_copies - before_off.device_to_host_copies);
  // ... and the profile reports them.
  CHECK(prof.host_syncs() == after_off.synchronizations - before_off.synchronizations);
  CHECK(prof.device_to_host_copies() == after_off.device_to_host_copies - before_off.device_to_host_copies);
}

#if defined(HG_CUDA_EMU)
TEST_CASE("profiler count-only mode records launches without running them (cuda-emu)", "[profiler]") {
  const Device d = Device::cuda(0);
  const int64_t M = 16, K = 8, N = 4;
  const Tensor a = hg::ones({M, K}, {.device = d}), b = hg::ones({K, N}, {.device = d});
  const Tensor c = hg::zeros({M, N}, {.device = d});
  profiler::Profile prof({.count_only = true});
  CHECK(prof.count_only());
  const Tensor y = hg::matmul(a, b);
  hg::ops::binary_scalar_(hg::OpId::add, c, 1.0);  // an element-wise launch, not run
  prof.stop();
  CHECK(prof.emulated());
  const auto found = ops_named(prof.records(), "matmul", Kind::op);
  REQUIRE(found.size() == 1);
  REQUIRE(found[0].second.size() == 1);
  CHECK(prof.records()[static_cast<size_t>(found[0].second[0])].flops == 2.0 * M * N * K);
  CHECK(c.sum().item<float>() == 0.0f);  // the add did not run
  // Off again: kernels run.
  hg::ops::binary_scalar_(hg::OpId::add, c, 1.0);
  CHECK(c.sum().item<float>() == static_cast<float>(M * N));
}
#endif
#endif
