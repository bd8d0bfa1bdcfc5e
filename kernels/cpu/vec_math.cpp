// The CPU math path and its ISA dispatch (kernels/cpu/vec_math.h).
#include "kernels/cpu/vec_math.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/norm/norm_simd.h"

#if defined(HG_HAVE_SLEEF)
namespace hg::cpu {
namespace vm_sse2 {
const VecMathTable& table();
const VecNormTable& norm_table();
}  // namespace vm_sse2
namespace vm_avx2 {
const VecMathTable& table();
const VecNormTable& norm_table();
}  // namespace vm_avx2
namespace vm_avx512 {
const VecMathTable& table();
const VecNormTable& norm_table();
}  // namespace vm_avx512
}  // namespace hg::cpu
#endif

namespace hg::cpu {

namespace {

bool env_is(const char* name, const char* value) {
  const char* env = std::getenv(name);
  return env != nullptr && std::strcmp(env, value) == 0;
}

// The widest ISA this CPU runs and the HG_CPU_ISA cap (runtime/cpu/cpu_dispatch.h).
VecIsa best_isa() {
#if defined(HG_HAVE_SLEEF)
  return best_vec_isa(cpu_features());
#else
  return VecIsa::sse2;
#endif
}

VecIsa env_cap() {
  switch (env_isa_cap()) {
    case IsaCap::sse2:
      return VecIsa::sse2;
    case IsaCap::avx2:
      return VecIsa::avx2;
    default:
      return VecIsa::avx512;
  }
}

struct State {
  std::atomic<CpuMath> math{env_is("HG_CPU_MATH", "scalar") ? CpuMath::scalar : CpuMath::sleef};
  std::atomic<VecIsa> cap{env_cap()};
  const VecIsa best = best_isa();
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void set_cpu_math(CpuMath math) { state().math.store(math); }
CpuMath cpu_math() { return state().math.load(); }
void set_cpu_isa_cap(VecIsa cap) { state().cap.store(cap); }
VecIsa cpu_isa_cap() { return state().cap.load(); }

VecIsa vec_isa() {
  State& s = state();
  const VecIsa cap = s.cap.load(std::memory_order_relaxed);
  return static_cast<int>(cap) < static_cast<int>(s.best) ? cap : s.best;
}

const VecMathTable* vec_math() {
#if defined(HG_HAVE_SLEEF)
  State& s = state();
  if (s.math.load(std::memory_order_relaxed) == CpuMath::scalar) return nullptr;
  switch (vec_isa()) {
    case VecIsa::avx512:
      return &vm_avx512::table();
    case VecIsa::avx2:
      return &vm_avx2::table();
    case VecIsa::sse2:
      return &vm_sse2::table();
  }
#endif
  return nullptr;
}

// The norm rows of the ISA vec_math() chose (kernels/norm/norm_simd.h).
const VecNormTable* vec_norm() {
#if defined(HG_HAVE_SLEEF)
  const VecMathTable* m = vec_math();
  if (m == &vm_avx512::table()) return &vm_avx512::norm_table();
  if (m == &vm_avx2::table()) return &vm_avx2::norm_table();
  if (m == &vm_sse2::table()) return &vm_sse2::norm_table();
#endif
  return nullptr;
}

const char* cpu_math_name() {
  const VecMathTable* t = vec_math();
  return t != nullptr ? t->name : "scalar";
}

bool vec_unary_has(OpId op) {
  switch (op) {
    case OpId::exp:
    case OpId::log:
    case OpId::tanh:
    case OpId::erf:
    case OpId::sigmoid:
    case OpId::silu:
    case OpId::gelu:
    case OpId::gelu_tanh:
    case OpId::softplus:
      return true;
    default:
      return false;
  }
}

// The backward of exp, log, tanh and sigmoid needs no transcendental function
// (their functors use the saved output or 1/x): the plain loop serves them.
bool vec_unary_backward_has(OpId op) {
  switch (op) {
    case OpId::erf:
    case OpId::silu:
    case OpId::gelu:
    case OpId::gelu_tanh:
    case OpId::softplus:
      return true;
    default:
      return false;
  }
}

}  // namespace hg::cpu
