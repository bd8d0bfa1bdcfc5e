// What the CPU's oneDNN paths share (kernels/cpu/onednn.h).
#include "kernels/cpu/onednn.h"

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

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace hg::cpu::onednn
