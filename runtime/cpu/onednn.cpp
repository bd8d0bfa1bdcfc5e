// What the CPU's oneDNN paths share (runtime/cpu/onednn.h).
#include "runtime/cpu/onednn.h"

#include <cstdlib>
#include <cstring>

namespace hg::cpu::onednn {

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

bool is_reference(const char* impl_info) { return impl_info != nullptr && std::strncmp(impl_info, "ref", 3) == 0; }

namespace {

OnednnIsa effective_isa() {
  // The values are nested bit masks: AVX-512 core within AVX512_BF16 within AMX.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto has = [&](dnnl::cpu_isa level) {
    const auto bits = static_cast<unsigned>(level);
    return (isa & bits) == bits;
  };
  if (has(dnnl::cpu_isa::avx512_core_amx)) return OnednnIsa::avx512_core_amx;
  if (has(dnnl::cpu_isa::avx512_core_bf16)) return OnednnIsa::avx512_core_bf16;
  if (has(dnnl::cpu_isa::avx512_core)) return OnednnIsa::avx512_core;
  return OnednnIsa::below_avx512;
}

using dnnl::memory;
using dt = memory::data_type;

bool f16_matmul_available() {
  try {
    const memory::desc a({64, 64}, dt::f16, {64, 1}), b({64, 64}, dt::f16, {64, 1}), c({64, 64}, dt::f16, {64, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
    return !is_reference(pd.impl_info_str());
  } catch (const dnnl::error&) {
    return false;
  }
}

bool f16_conv_available() {
  using tag = memory::format_tag;
  try {
    const memory::desc s({1, 16, 8, 8}, dt::f16, tag::any), w({16, 16, 3, 3}, dt::f16, tag::any),
        d({1, 16, 8, 8}, dt::f16, tag::any);
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               s, w, d, {1, 1}, {0, 0}, {1, 1}, {1, 1});
    const dnnl::convolution_forward::primitive_desc pd(desc, engine());
    return !is_reference(pd.impl_info_str());
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

const OnednnCaps& caps() {
  static const OnednnCaps c = [] {
    OnednnCaps r;
    r.isa = effective_isa();
    r.f16_matmul = f16_matmul_available();
    r.f16_conv = f16_conv_available();
    return r;
  }();
  return c;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace hg::cpu::onednn
