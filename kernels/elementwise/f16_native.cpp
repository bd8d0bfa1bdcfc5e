// The native f16 element-wise dispatch (kernels/elementwise/f16_native.h).
#include "kernels/elementwise/f16_native.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/cpu/vec_math.h"

namespace hg::cpu {

#if !defined(HG_HAVE_F16_NATIVE)  // kernels/elementwise/sources.cmake: the compiler has no -mavx512fp16
const F16NativeTable* f16_native_avx512fp16() { return nullptr; }
#endif

std::optional<F16Op> f16_native_op(OpId op) {
  switch (op) {
    case OpId::add:
      return F16Op::add;
    case OpId::sub:
      return F16Op::sub;
    case OpId::mul:
      return F16Op::mul;
    case OpId::div:
      return F16Op::div;
    case OpId::maximum:
      return F16Op::maximum;
    case OpId::minimum:
      return F16Op::minimum;
    case OpId::neg:
      return F16Op::neg;
    case OpId::abs:
      return F16Op::abs;
    case OpId::relu:
      return F16Op::relu;
    case OpId::sqrt:
      return F16Op::sqrt;
    default:
      return std::nullopt;
  }
}

namespace {
std::atomic<const F16NativeTable*> g_for_testing{nullptr};
}  // namespace

void set_f16_native_for_testing(const F16NativeTable* t) { g_for_testing.store(t); }

const F16NativeTable* f16_native() {
  if (const F16NativeTable* forced = g_for_testing.load(std::memory_order_relaxed)) return forced;
  const F16NativeTable* t = f16_native_avx512fp16();
  const Decision d = f16_elementwise_decision(cpu_features(), env_isa_cap(), cpu_isa_cap(), t != nullptr);
  // HG_CPU_ISA=avx512fp16 asks for the native path; where it cannot run, the
  // request is ignored (never an illegal instruction) and said so once.
  static const bool warned = [&] {
    const char* isa = std::getenv("HG_CPU_ISA");
    if (isa == nullptr || std::strcmp(isa, "avx512fp16") != 0 || *d.reason == '\0') return false;
    HG_LOG_WARN("HG_CPU_ISA=avx512fp16 ignored: {}; f16 element-wise ops widen to f32", d.reason);
    return true;
  }();
  (void)warned;
  return *d.reason == '\0' ? t : nullptr;
}

}  // namespace hg::cpu
