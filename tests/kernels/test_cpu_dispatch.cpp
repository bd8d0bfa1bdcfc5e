// The CPU's ISA dispatch (runtime/cpu/cpu_dispatch.h) and the native f16
// element-wise kernels (kernels/elementwise/f16_native.h).
//
// Decisions: forced feature sets (a Sapphire Rapids-class Xeon with
// AVX512-FP16 and AMX, a Zen 4 with AVX512_BF16 only, an AVX2-only CPU, the
// SSE2 baseline) must give the documented vector math ISA, f16 element-wise
// path, GEMM paths and oneDNN convolution decisions (kernels/cpu/README.md, "CPU
// math: SLEEF and ISA dispatch"), and this machine's real decisions must be
// the pure functions of its own CPUID.
//
// Kernels: the AVX512-FP16 kernels cannot run on a CPU without the ISA, so
// the same source compiled without it (tests/kernels/f16_native_soft.cpp,
// f32 arithmetic rounded once per operation) runs here against the widening
// path's values (the op's float functor on the widened values, rounded once
// by core/half.h): every f16 value for the unary ops and as the first operand
// of the binary ones, against a set of special and random second operands,
// bit for bit (a NaN result need only be NaN). Where the CPU has AVX512-FP16,
// the native kernels run through the same comparison.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/elementwise/f16_native.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise/elementwise_functors.h"
#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"
#include "tests/skip.h"

namespace hg::cpu {
const F16NativeTable* f16_native_soft_table();  // tests/kernels/f16_native_soft.cpp
}  // namespace hg::cpu

using namespace hg;
using cpu::IsaCap;
using cpu::OnednnIsa;
using cpu::VecIsa;

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

cpu::OnednnCaps caps_for(const cpu::CpuFeatures& f, bool f16_onednn) {
  return {cpu::onednn_isa_for(f), f16_onednn, f16_onednn};
}

}  // namespace

TEST_CASE("ISA dispatch: forced CPU classes get the documented paths", "[kernels][dispatch]") {
  const cpu::CpuFeatures spr = cpu::sapphire_rapids_features(), zen4 = cpu::zen4_features(),
                         avx2 = cpu::avx2_features(), sse2 = cpu::sse2_features();

  SECTION("vector math ISA") {
    CHECK(cpu::best_vec_isa(spr) == VecIsa::avx512);
    CHECK(cpu::best_vec_isa(zen4) == VecIsa::avx512);
    CHECK(cpu::best_vec_isa(avx2) == VecIsa::avx2);
    CHECK(cpu::best_vec_isa(sse2) == VecIsa::sse2);
    cpu::CpuFeatures no_zmm = zen4;
    no_zmm.os_zmm = false;  // AVX-512 in CPUID, but the OS saves no ZMM state
    CHECK(cpu::best_vec_isa(no_zmm) == VecIsa::avx2);
  }

  SECTION("HG_CPU_ISA values") {
    bool unknown = true;
    CHECK(cpu::parse_isa_cap(nullptr, &unknown) == IsaCap::none);
    CHECK_FALSE(unknown);
    CHECK(cpu::parse_isa_cap("generic") == IsaCap::sse2);
    CHECK(cpu::parse_isa_cap("sse2") == IsaCap::sse2);
    CHECK(cpu::parse_isa_cap("avx2") == IsaCap::avx2);
    CHECK(cpu::parse_isa_cap("avx512") == IsaCap::avx512);
    CHECK(cpu::parse_isa_cap("native") == IsaCap::none);
    CHECK(cpu::parse_isa_cap("avx512fp16") == IsaCap::none);
    CHECK(cpu::parse_isa_cap("avx9000", &unknown) == IsaCap::none);
    CHECK(unknown);
  }

  SECTION("f16 element-wise") {
    auto path = [](const cpu::CpuFeatures& f, IsaCap cap = IsaCap::none, VecIsa vec = VecIsa::avx512,
                   bool built = true) { return std::string(cpu::f16_elementwise_decision(f, cap, vec, built).path); };
    CHECK(path(spr) == "native-avx512fp16");
    CHECK(std::string(cpu::f16_elementwise_decision(spr, IsaCap::none, VecIsa::avx512, true).reason).empty());
    // Capped below AVX512-FP16 by the switch or at run time, or not built: widen.
    CHECK(path(spr, IsaCap::avx512) == "widen");
    CHECK(path(spr, IsaCap::sse2) == "widen");
    CHECK(path(spr, IsaCap::none, VecIsa::avx2) == "widen");
    CHECK(path(spr, IsaCap::none, VecIsa::avx512, false) == "widen");
    cpu::CpuFeatures spr_no_zmm = spr;
    spr_no_zmm.os_zmm = false;
    CHECK(path(spr_no_zmm) == "widen");
    // No AVX512-FP16: widen (bf16 always widens: AVX512-FP16 has no bf16 arithmetic).
    CHECK(path(zen4) == "widen");
    CHECK(std::string(cpu::f16_elementwise_decision(zen4, IsaCap::none, VecIsa::avx512, true).reason) ==
          "the CPU has no AVX512-FP16");
    CHECK(path(avx2) == "widen");
    CHECK(path(sse2) == "widen");
  }

  SECTION("oneDNN's ISA class") {
    CHECK(cpu::onednn_isa_for(spr) == OnednnIsa::avx512_core_amx);
    CHECK(cpu::onednn_isa_for(zen4) == OnednnIsa::avx512_core_bf16);
    CHECK(cpu::onednn_isa_for(avx2) == OnednnIsa::below_avx512);
    CHECK(cpu::onednn_isa_for(sse2) == OnednnIsa::below_avx512);
    cpu::CpuFeatures spr_no_amx_state = spr;
    spr_no_amx_state.os_amx = false;  // the OS does not enable the tiles: AVX512_BF16
    CHECK(cpu::onednn_isa_for(spr_no_amx_state) == OnednnIsa::avx512_core_bf16);
  }

  SECTION("GEMM paths") {
    // Sapphire Rapids with this oneDNN (2.6: no f16 matmul): bf16 on AMX, f16
    // widens to f32's path, oneDNN's f32 matmul.
    cpu::GemmDecision d = cpu::gemm_decision(caps_for(spr, false), nullptr, false);
    CHECK(std::string(d.f32.path) == "onednn-f32");
    CHECK(std::string(d.bf16.path) == "onednn-bf16");
    CHECK(std::string(d.bf16.how).find("AMX") != std::string::npos);
    CHECK(std::string(d.f16.path) == "widen-onednn-f32");
    CHECK(std::string(d.f16.how).find("oneDNN f32") != std::string::npos);
    CHECK(std::string(d.f16.reason).find("no f16 matmul") != std::string::npos);
    // ... with a oneDNN that has an f16 matmul there: oneDNN.
    d = cpu::gemm_decision(caps_for(spr, true), nullptr, false);
    CHECK(std::string(d.f16.path) == "onednn-f16");
    CHECK(std::string(d.f16.reason).empty());
    // Zen 4: bf16 with VDPBF16PS, f16 widens.
    d = cpu::gemm_decision(caps_for(zen4, false), nullptr, false);
    CHECK(std::string(d.f32.path) == "onednn-f32");
    CHECK(std::string(d.bf16.path) == "onednn-bf16");
    CHECK(std::string(d.bf16.how).find("VDPBF16PS") != std::string::npos);
    CHECK(std::string(d.f16.path) == "widen-onednn-f32");
    // AVX2 and SSE2: OpenBLAS and widening.
    for (const auto& f : {avx2, sse2}) {
      d = cpu::gemm_decision(caps_for(f, false), nullptr, false);
      CHECK(std::string(d.f32.path) == "openblas");
      CHECK(std::string(d.bf16.path) == "widen-sgemm");
      CHECK(std::string(d.bf16.reason) == "the CPU has neither AVX512_BF16 nor AMX");
      CHECK(std::string(d.f16.path) == "widen-sgemm");
    }
    // The switches win over every CPU.
    d = cpu::gemm_decision(caps_for(spr, true), "widen", false);
    CHECK(std::string(d.f32.path) == "openblas");
    CHECK(std::string(d.bf16.reason) == "HG_CPU_GEMM=widen");
    CHECK(std::string(d.f16.path) == "widen-sgemm");
    d = cpu::gemm_decision(caps_for(spr, true), nullptr, true);
    CHECK(std::string(d.bf16.reason) == "HG_CPU_ISA=generic");
    CHECK(std::string(d.f16.reason) == "HG_CPU_ISA=generic");
    d = cpu::gemm_decision(caps_for(spr, false), "openblas", false);
    CHECK(std::string(d.f32.reason) == "HG_CPU_GEMM=openblas");
    CHECK(std::string(d.bf16.path) == "onednn-bf16");
    CHECK(std::string(d.f16.path) == "widen-sgemm");  // f32's path is OpenBLAS
  }

  SECTION("oneDNN convolution") {
    using cpu::ConvMode;
    auto reason = [](DType dt, const cpu::OnednnCaps& c, ConvMode m = ConvMode::automatic, bool generic = false) {
      return std::string(cpu::conv_onednn_decision(dt, c, m, generic));
    };
    CHECK(reason(DType::F32, caps_for(spr, false)).empty());
    CHECK(reason(DType::BF16, caps_for(spr, false)).empty());
    CHECK(reason(DType::F16, caps_for(spr, false)).find("no f16 convolution") != std::string::npos);
    CHECK(reason(DType::F16, caps_for(spr, true)).empty());
    CHECK(reason(DType::F32, caps_for(zen4, false)).empty());
    CHECK(reason(DType::BF16, caps_for(zen4, false)).empty());
    CHECK_FALSE(reason(DType::F16, caps_for(zen4, false)).empty());
    CHECK_FALSE(reason(DType::F32, caps_for(avx2, false)).empty());
    CHECK_FALSE(reason(DType::BF16, caps_for(avx2, false)).empty());
    CHECK(reason(DType::F32, caps_for(avx2, false), ConvMode::onednn).empty());  // forced
    CHECK(reason(DType::F32, caps_for(spr, false), ConvMode::im2col) == "HG_CPU_CONV=im2col");
    CHECK(reason(DType::BF16, caps_for(spr, false), ConvMode::automatic, true) == "HG_CPU_ISA=generic");
    CHECK(reason(DType::F64, caps_for(spr, true)) == "oneDNN has no f64 convolution");
  }
}

TEST_CASE("ISA dispatch: this machine's decisions are the pure functions of its CPUID", "[kernels][dispatch]") {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  INFO("features: " << cpu::cpu_features_string(f));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();  // GCC's own CPUID + XCR0 reading
  CHECK((f.avx2 && f.os_ymm) == static_cast<bool>(__builtin_cpu_supports("avx2")));
  CHECK((f.avx512f && f.os_zmm) == static_cast<bool>(__builtin_cpu_supports("avx512f")));
  CHECK((f.avx512bw && f.os_zmm) == static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  CHECK((f.avx512_bf16 && f.os_zmm) == static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
  CHECK((f.avx512_fp16 && f.os_zmm) == static_cast<bool>(__builtin_cpu_supports("avx512fp16")));
#endif
  // The f16 element-wise path: native exactly where the decision says so.
  const cpu::Decision ew =
      cpu::f16_elementwise_decision(f, cpu::env_isa_cap(), cpu::cpu_isa_cap(), cpu::f16_native_avx512fp16() != nullptr);
  INFO("f16 element-wise: " << ew.path << " (" << ew.reason << ")");
  CHECK((cpu::f16_native() != nullptr) == std::string(ew.reason).empty());
  if (!f.avx512_fp16) CHECK(cpu::f16_native() == nullptr);

  // The GEMM paths, where no switch overrides oneDNN's own detection.
  const bool switched =
      env_set("HG_CPU_GEMM") || env_set("HG_CPU_ISA") || env_set("DNNL_MAX_CPU_ISA") || env_set("ONEDNN_MAX_CPU_ISA");
  if (cpu::gemm_has_onednn() && !switched) {
    const cpu::GemmDecision d = cpu::gemm_decision(caps_for(f, false), nullptr, false);
    CHECK(std::string(cpu::gemm_path(DType::F32)) == d.f32.path);
    CHECK(std::string(cpu::gemm_path(DType::BF16)) == d.bf16.path);
    if (!f.avx512_fp16) CHECK(std::string(cpu::gemm_path(DType::F16)) == d.f16.path);
  }
  // A Zen 4-class CPU (AVX512_BF16, no AVX512-FP16, no AMX) decides as the forced Zen 4 does.
  if (cpu::onednn_isa_for(f) == OnednnIsa::avx512_core_bf16 && !f.avx512_fp16) {
    const cpu::CpuFeatures z = cpu::zen4_features();
    CHECK(cpu::best_vec_isa(f) == cpu::best_vec_isa(z));
    CHECK(std::string(cpu::f16_elementwise_decision(f, IsaCap::none, VecIsa::avx512, true).path) ==
          cpu::f16_elementwise_decision(z, IsaCap::none, VecIsa::avx512, true).path);
    if (cpu::gemm_has_onednn() && !switched) {
      const cpu::GemmDecision dz = cpu::gemm_decision(caps_for(z, false), nullptr, false);
      CHECK(std::string(cpu::gemm_path(DType::F32)) == dz.f32.path);
      CHECK(std::string(cpu::gemm_path(DType::BF16)) == dz.bf16.path);
      CHECK(std::string(cpu::gemm_path(DType::F16)) == dz.f16.path);
    }
  }
}

namespace {

using ew::Binary;
using ew::Unary;

// The widening path's value: the op's float functor on the widened values,
// rounded once.
uint16_t widened(cpu::F16Op op, uint16_t a, uint16_t b) {
  const float x = detail::half_bits_to_float(a), y = detail::half_bits_to_float(b);
  float r = 0;
  switch (op) {
    case cpu::F16Op::add:
      r = Binary<OpId::add, float>{}.forward(x, y);
      break;
    case cpu::F16Op::sub:
      r = Binary<OpId::sub, float>{}.forward(x, y);
      break;
    case cpu::F16Op::mul:
      r = Binary<OpId::mul, float>{}.forward(x, y);
      break;
    case cpu::F16Op::div:
      r = Binary<OpId::div, float>{}.forward(x, y);
      break;
    case cpu::F16Op::maximum:
      r = Binary<OpId::maximum, float>{}.forward(x, y);
      break;
    case cpu::F16Op::minimum:
      r = Binary<OpId::minimum, float>{}.forward(x, y);
      break;
    case cpu::F16Op::neg:
      r = Unary<OpId::neg, float>{}.forward(x);
      break;
    case cpu::F16Op::abs:
      r = Unary<OpId::abs, float>{}.forward(x);
      break;
    case cpu::F16Op::relu:
      r = Unary<OpId::relu, float>{}.forward(x);
      break;
    case cpu::F16Op::sqrt:
      r = Unary<OpId::sqrt, float>{}.forward(x);
      break;
  }
  return detail::float_to_half_bits(r);
}

bool is_nan_bits(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

// Every f16 value, then the second operands: signed zeros, ones, the
// smallest and largest subnormals, the smallest normal, the largest finite,
// infinities, NaNs, values whose sums and quotients round at a tie, and
// random values.
std::vector<uint16_t> second_operands() {
  std::vector<uint16_t> v = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00,
                             0xfc00, 0x7e00, 0xfe01, 0x3c01, 0x4000, 0x4200, 0x1400, 0x3555, 0x5bff, 0x2e66, 0xc880};
  std::mt19937 rng(32);
  for (int i = 0; i < 26; ++i) v.push_back(static_cast<uint16_t>(rng()));
  return v;
}

// Runs table t's kernels against the widening values; n values per call with
// an odd length so that every call has a partial vector.
void check_table(const cpu::F16NativeTable& t, const char* name) {
  const int64_t n = 65536 + 17;  // every value (and 17 twice), ending in a partial vector
  std::vector<uint16_t> a(n), y(n);
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<uint16_t>((i * 7 + 3) & 0xffff);
  auto check = [&](cpu::F16Op op, uint16_t b, const char* what) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = widened(op, a[i], b);
      const bool ok = is_nan_bits(want) ? is_nan_bits(y[i]) : y[i] == want;
      if (!ok && bad++ == 0) first = i;
    }
    INFO(name << " " << what << " op " << static_cast<int>(op) << " b=0x" << std::hex << b << ": first mismatch a=0x"
              << (first >= 0 ? a[first] : 0) << " got 0x" << (first >= 0 ? y[first] : 0) << " want 0x"
              << (first >= 0 ? widened(op, a[first], b) : 0) << std::dec);
    CHECK(bad == 0);
  };
  for (cpu::F16Op op : {cpu::F16Op::neg, cpu::F16Op::abs, cpu::F16Op::relu, cpu::F16Op::sqrt}) {
    t.unary(op, a.data(), y.data(), n);
    check(op, 0, "unary");
  }
  for (uint16_t b : second_operands()) {
    const std::vector<uint16_t> bv(n, b);
    for (cpu::F16Op op : {cpu::F16Op::add, cpu::F16Op::sub, cpu::F16Op::mul, cpu::F16Op::div, cpu::F16Op::maximum,
                          cpu::F16Op::minimum}) {
      t.binary(op, a.data(), bv.data(), y.data(), n);
      check(op, b, "binary");
      t.scalar(op, a.data(), b, y.data(), n);
      check(op, b, "scalar");
    }
  }
  // Both operands random, and in place (y aliases a).
  std::mt19937 rng(16);
  std::vector<uint16_t> b(n);
  for (auto& v : b) v = static_cast<uint16_t>(rng());
  for (cpu::F16Op op : {cpu::F16Op::add, cpu::F16Op::mul, cpu::F16Op::div}) {
    std::vector<uint16_t> x = a;
    t.binary(op, x.data(), b.data(), x.data(), n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = widened(op, a[i], b[i]);
      bad += is_nan_bits(want) ? !is_nan_bits(x[i]) : x[i] != want;
    }
    INFO(name << " random pairs in place, op " << static_cast<int>(op));
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("native f16 element-wise kernels (same source, no AVX512-FP16) are bit-identical to the widening path",
          "[kernels][dispatch][needs-f16-soft]") {
  const cpu::F16NativeTable* soft = cpu::f16_native_soft_table();
  if (soft == nullptr) HG_SKIP("this compiler has no _Float16 without AVX512-FP16");
  check_table(*soft, "same source without AVX512-FP16");
}

TEST_CASE("native f16 element-wise kernels (AVX512-FP16) are bit-identical to the widening path",
          "[kernels][dispatch][needs-avx512fp16]") {
  const cpu::F16NativeTable* native = cpu::f16_native_avx512fp16();
  const cpu::CpuFeatures& f = cpu::cpu_features();
  if (native == nullptr || !f.avx512_fp16 || !f.avx512bw || !f.avx512vl || !f.os_zmm) {
    HG_SKIP("this CPU or build has no AVX512-FP16 kernels (" << cpu::cpu_features_string(f) << ")");
  }
  check_table(*native, "AVX512-FP16");
}

// The element-wise loop's use of the native kernels (Note [Native f16
// element-wise] in kernels/elementwise/elementwise_cpu.cpp), through the ops, with the
// same-source kernels standing in for the AVX512-FP16 ones: every op gives
// the widening path's bits on contiguous f16 tensors (sizes with a partial
// vector, below and above the parallel grain; special values), a scalar f16 cannot
// hold (0.1) takes the widening path, and bf16 and strided operands never
// reach the kernels.
TEST_CASE("the element-wise loop runs the native f16 kernels where they apply", "[kernels][dispatch][needs-f16-soft]") {
  const cpu::F16NativeTable* soft = cpu::f16_native_soft_table();
  if (soft == nullptr) HG_SKIP("this compiler has no _Float16 without AVX512-FP16");
  // Counts the kernels' calls, then runs the soft kernels.
  static std::atomic<int> calls{0};
  static const cpu::F16NativeTable* inner = nullptr;
  inner = soft;
  static const cpu::F16NativeTable counting{
      [](cpu::F16Op op, const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n) {
        ++calls;
        inner->binary(op, a, b, y, n);
      },
      [](cpu::F16Op op, const uint16_t* a, uint16_t s, uint16_t* y, int64_t n) {
        ++calls;
        inner->scalar(op, a, s, y, n);
      },
      [](cpu::F16Op op, const uint16_t* x, uint16_t* y, int64_t n) {
        ++calls;
        inner->unary(op, x, y, n);
      }};
  struct Reset {
    ~Reset() { cpu::set_f16_native_for_testing(nullptr); }
  } reset;

  auto bits = [](const Tensor& t) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const uint16_t*>(c.data_ptr());
    return std::vector<uint16_t>(p, p + c.numel());
  };
  auto same = [&](const Tensor& native, const Tensor& widened) {
    const std::vector<uint16_t> x = bits(native), y = bits(widened);
    REQUIRE(x.size() == y.size());
    int64_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += is_nan_bits(y[i]) ? !is_nan_bits(x[i]) : x[i] != y[i];
    return bad;
  };
  // Runs f with the native kernels and without; returns the kernels' calls.
  auto check = [&](const char* what, const std::function<Tensor()>& f) {
    cpu::set_f16_native_for_testing(&counting);
    calls = 0;
    const Tensor native = f();
    const int used = calls.load();
    cpu::set_f16_native_for_testing(nullptr);
    const Tensor widened = f();
    INFO(what);
    CHECK(same(native, widened) == 0);
    return used;
  };

  // HG_CPU_EW_BLOCKS=0 (the per-element reference loop) leaves the kernels out.
  const char* blocks_env = std::getenv("HG_CPU_EW_BLOCKS");
  const bool blocks = !(blocks_env != nullptr && std::string(blocks_env) == "0");
  auto native = [&](int used) { return blocks ? used > 0 : used == 0; };
  for (int64_t n : {int64_t{1}, int64_t{45}, int64_t{70001}}) {
    INFO("n = " << n);
    const Tensor a = test::make_input({n}, kF16, test::Domain::kAny, 1);
    const Tensor b = test::make_input({n}, kF16, n == 45 ? test::Domain::kExtreme : test::Domain::kAny, 2);
    for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::minimum}) {
      CHECK(native(check("binary", [&] { return ops::binary(op, a, b); })));
      CHECK(native(check("scalar 0.5", [&] { return ops::binary_scalar(op, a, 0.5); })));
      CHECK(check("scalar 0.1", [&] { return ops::binary_scalar(op, a, 0.1); }) == 0);  // not an f16 value
    }
    for (OpId op : {OpId::neg, OpId::abs, OpId::relu, OpId::sqrt}) {
      CHECK(native(check("unary", [&] { return ops::unary(op, a); })));
    }
    // bf16 and strided operands keep the widening path.
    const Tensor a16 = a.to(kBF16), b16 = b.to(kBF16);
    CHECK(check("bf16", [&] { return ops::binary(OpId::mul, a16, b16); }) == 0);
    if (n > 1) {
      const Tensor strided = test::make_noncontiguous(a);
      CHECK(check("strided", [&] { return ops::unary(OpId::neg, strided); }) == 0);
    }
  }
}
