#include "train/precision.h"

#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "core/error.h"
#include "kernels/gemm/gemm.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hg::train {
namespace {

struct Mode {
  const char* name;
  Precision precision;
};

// The one table of modes: weights, autocast, autocast dtype, scaler, fp8.
// amp-bf16 has no scaler, as PyTorch's bf16 recipe: bf16 has f32's range, so
// a scaled loss buys nothing and the scaler's unscale and overflow check cost
// a pass over every gradient each step. amp-fp8 keeps it: its E5M2 gradients
// have fp16's range, and the fp8 recipe's scale update is skipped with an
// overflowed step through the scaler's found_inf (Fp8Training::update).
// bf16-master keeps it for its 16-bit weight update (docs/amp.md).
constexpr Mode kPrecisionModes[] = {
    {"fp32", {kF32, false, kF16, false}},        {"fp16-master", {kF16, true, kF16, true}},
    {"bf16-master", {kBF16, true, kBF16, true}}, {"amp-fp16", {kF32, true, kF16, true}},
    {"amp-bf16", {kF32, true, kBF16, false}},    {"amp-fp8", {kF32, true, kBF16, true, true}},
};

}  // namespace

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (const Mode& m : kPrecisionModes) names.emplace_back(m.name);
  return names;
}

Precision precision_of(const std::string& name) {
  for (const Mode& m : kPrecisionModes) {
    if (name == m.name) return m.precision;
  }
  std::string known;
  for (const Mode& m : kPrecisionModes) known += std::string(known.empty() ? "" : " | ") + m.name;
  HG_FAIL("precision '", name, "' is not a precision mode (", known, name == "auto" ? "; resolve 'auto' first" : "",
          ")");
}

bool native_bf16_matmul(Device device) {
  if (device.is_cpu()) return std::string(cpu::gemm_path(kBF16)) == "onednn-bf16";
  return amp::supported(device, kBF16);
}

std::string resolve_precision(const std::string& name, Device device) {
  if (name != "auto") return name;
  if (native_bf16_matmul(device)) return "amp-bf16";
  return device.is_cpu() ? "fp32" : "amp-fp16";
}

Device pick_device(const std::string& name) {
  if (name == "auto") {
#if defined(HG_WITH_CUDA)
    if (cuda::is_available()) return Device::cuda(0);
#endif
    return Device::cpu();
  }
  return Device::parse(name);
}

}  // namespace hg::train
