// Autocast regions, input casting and the cast cache (Note [Autocast] and
// Note [Cast cache] in autograd/autocast.h), and the hardware report.
#include "autograd/autocast.h"

#include <atomic>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/elementwise/f16_native.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/gemm/gemm.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hg::amp {

namespace {

struct CacheEntry {
  Tensor source;  // keeps the leaf alive, so its address is not reused
  uint64_t version;
  Tensor cast;
};

struct ThreadState {
  bool enabled[kNumDeviceTypes] = {false, false};
  DType dtype[kNumDeviceTypes] = {kBF16, kF16};
  int depth = 0;     // live guards
  int excluded = 0;  // live AutocastExcluded
  std::map<std::pair<const void*, DType>, CacheEntry> cache;
  CastCacheStats stats;
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

size_t index_of(DeviceType t) { return static_cast<size_t>(t); }

std::atomic<bool> g_cpu_f16_warned{false};  // set_cpu_f16_warning(false) sets it too

// Once per process, when an op is first lowered to f16 on the CPU (not when a
// region opens: Autocast(kF16) covers every device type, and a model on a GPU
// should not hear about the CPU). The CPU GEMMs widen f16 to f32 (no native
// f16 matmul in OpenBLAS or oneDNN here), so f16 autocast costs casts and
// saves nothing there.
void warn_cpu_f16_once() {
  if (g_cpu_f16_warned.load(std::memory_order_relaxed) || g_cpu_f16_warned.exchange(true)) return;
  HG_LOG_WARN(
      "Autocast(f16) on the CPU: the CPU kernels widen f16 matmuls to f32, so f16 autocast is slower "
      "than fp32 here (3-4x on a small transformer); bf16 is the fast 16-bit type on the CPU: "
      "Autocast(hg::kBF16), or Autocast() for the per-device defaults");
}

void check_dtype(DType dtype) {
  HG_CHECK(dtype == kF16 || dtype == kBF16, "Autocast: the autocast dtype must be f16 or bf16, got ", dtype);
}

// Raises for bf16 on a GPU without it; warns once for f16 without tensor cores.
void check_hardware(DeviceType type, DType dtype) {
#if defined(HG_WITH_CUDA)
  if (type != DeviceType::CUDA || !cuda::is_available()) return;
  const cudaDeviceProp& p = cuda::device_properties();
  const int cc = p.major * 10 + p.minor;
  HG_CHECK(dtype != kBF16 || cc >= 80, "Autocast: bf16 needs a GPU of compute capability 8.0 or newer, but ",
           p.name, " is ", p.major, ".", p.minor, "; use Autocast(hg::kF16) (with a GradScaler) instead");
  if (dtype == kF16 && cc < 70) {
    static bool warned = false;
    if (!warned) {
      warned = true;
      HG_LOG_WARN("Autocast: {} (compute capability {}.{}) has no tensor cores; f16 saves memory but not time",
                  p.name, p.major, p.minor);
    }
  }
#else
  (void)type;
  (void)dtype;
#endif
}

// A leaf weight whose cast may be cached.
bool cacheable(const Tensor& x) { return x.is_leaf() && x.requires_grad() && x.dtype() == kF32; }

Tensor cast_to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  ThreadState& s = state();
  if (!cacheable(x)) return to(x, dtype);
  const auto key = std::make_pair(static_cast<const void*>(x.impl_ptr()), dtype);
  auto it = s.cache.find(key);
  if (it != s.cache.end() && it->second.version == x.version()) {
    ++s.stats.hits;
    return it->second.cast;
  }
  Tensor cast = to(x, dtype);
  ++s.stats.casts;
  // Only a cast that carries its graph is kept (Note [Cast cache]).
  if (is_grad_enabled()) s.cache[key] = CacheEntry{x, x.version(), cast};
  return cast;
}

bool is_16bit(DType t) { return t == kF16 || t == kBF16; }

}  // namespace

void set_cpu_f16_warning(bool enabled) { g_cpu_f16_warned = !enabled; }

DType default_autocast_dtype(DeviceType type) { return type == DeviceType::CUDA ? kF16 : kBF16; }

Autocast::Autocast(DType dtype, bool enabled) {
  check_dtype(dtype);
  ThreadState& s = state();
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    saved_[t] = {s.enabled[t], s.dtype[t]};
  }
  if (enabled) check_hardware(DeviceType::CUDA, dtype);
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    s.enabled[t] = enabled;
    s.dtype[t] = dtype;
  }
  ++s.depth;
}

Autocast::Autocast() {
  ThreadState& s = state();
  for (int t = 0; t < kNumDeviceTypes; ++t) saved_[t] = {s.enabled[t], s.dtype[t]};
  check_hardware(DeviceType::CUDA, default_autocast_dtype(DeviceType::CUDA));
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    s.enabled[t] = true;
    s.dtype[t] = default_autocast_dtype(static_cast<DeviceType>(t));
  }
  ++s.depth;
}

Autocast::Autocast(DeviceType type, DType dtype, bool enabled) {
  check_dtype(dtype);
  ThreadState& s = state();
  for (int t = 0; t < kNumDeviceTypes; ++t) saved_[t] = {s.enabled[t], s.dtype[t]};
  if (enabled) check_hardware(type, dtype);
  s.enabled[index_of(type)] = enabled;
  s.dtype[index_of(type)] = dtype;
  ++s.depth;
}

Autocast::~Autocast() {
  ThreadState& s = state();
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    s.enabled[t] = saved_[t].enabled;
    s.dtype[t] = saved_[t].dtype;
  }
  if (--s.depth == 0) {
    s.cache.clear();  // the outermost region ends
  }
}

bool is_autocast_enabled(DeviceType type) { return state().enabled[index_of(type)]; }
DType autocast_dtype(DeviceType type) { return state().dtype[index_of(type)]; }

bool autocast_active() {
  const ThreadState& s = state();
  return s.excluded == 0 && (s.enabled[0] || s.enabled[1]);
}

AutocastExcluded::AutocastExcluded() { ++state().excluded; }
AutocastExcluded::~AutocastExcluded() { --state().excluded; }

namespace {
// The casts of autocast_inputs over any range of const Tensor*.
template <typename Range>
void autocast_range(OpId op, const Range& inputs, Tensor* out) {
  size_t n = 0;
  const Tensor* first = nullptr;  // the first floating input decides the device type
  for (const Tensor* t : inputs) {
    out[n++] = *t;
    if (first == nullptr && t->defined() && is_floating(t->dtype())) first = t;
  }
  if (first == nullptr) return;
  const ThreadState& s = state();
  const size_t dev = index_of(first->device().type);
  if (!s.enabled[dev]) return;
  const AmpClass cls = policy().get(op);
  switch (cls) {
    case AmpClass::passthrough:
      return;
    case AmpClass::banned:
      HG_FAIL(op_name(op), " is banned in autocast regions (it is unsafe in 16 bits); use ",
              PolicyTable::banned_alternative(op), ", or run it with autocast disabled");
    case AmpClass::lower:
    case AmpClass::fp32: {
      const DType target = cls == AmpClass::lower ? s.dtype[dev] : kF32;
      if (target == kF16 && first->device().is_cpu()) warn_cpu_f16_once();
      for (size_t i = 0; i < n; ++i) {
        const Tensor& t = out[i];
        if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == kF64) continue;
        if (cls == AmpClass::fp32 && !is_16bit(t.dtype())) continue;
        out[i] = cast_to(t, target);
      }
      return;
    }
    case AmpClass::promote: {
      bool any_f64 = false, any_f32 = false, any_f16 = false, any_bf16 = false;
      for (size_t i = 0; i < n; ++i) {
        if (!out[i].defined()) continue;
        const DType d = out[i].dtype();
        any_f64 = any_f64 || d == kF64;
        any_f32 = any_f32 || d == kF32;
        any_f16 = any_f16 || d == kF16;
        any_bf16 = any_bf16 || d == kBF16;
      }
      if (any_f64) return;  // f64 is left to the op's own promotion
      const DType target = any_f32 || (any_f16 && any_bf16) ? kF32 : any_f16 ? kF16 : kBF16;
      for (size_t i = 0; i < n; ++i) {
        const Tensor& t = out[i];
        if (t.defined() && is_floating(t.dtype()) && t.dtype() != target) out[i] = cast_to(t, target);
      }
      return;
    }
  }
}

}  // namespace

void autocast_inputs(OpId op, std::initializer_list<const Tensor*> inputs, Tensor* out) {
  autocast_range(op, inputs, out);
}

std::vector<Tensor> autocast_inputs(OpId op, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (const Tensor& t : inputs) pointers.push_back(&t);
  std::vector<Tensor> out(inputs.size());
  autocast_range(op, pointers, out.data());
  return out;
}

CastCacheStats cast_cache_stats() {
  ThreadState& s = state();
  CastCacheStats out = s.stats;
  out.entries = static_cast<int64_t>(s.cache.size());
  return out;
}

bool supported(Device device, DType dtype) {
  if (dtype == kF32 || dtype == kF64) return true;
  if (!is_16bit(dtype) && !is_fp8(dtype)) return false;
  if (device.is_cpu()) return true;  // natively or widened to f32 (capability_report says which)
#if defined(HG_WITH_CUDA)
  if (!cuda::is_available() || device.index >= cuda::device_count()) return false;
  const cudaDeviceProp& p = cuda::device_properties(device.index);
  const int cc = p.major * 10 + p.minor;
  if (is_fp8(dtype)) return cc >= 89;  // fp8 tensor cores: Ada (sm_89) and Hopper (sm_90) on
  return dtype == kF16 ? cc >= 53 : cc >= 80;
#else
  return false;
#endif
}

std::string capability_report(Device device) {
  if (device.is_cpu()) {
    // CPUID / XCR0 as the dispatchers read them (runtime/cpu/cpu_dispatch.h).
    const cpu::CpuFeatures& f = cpu::cpu_features();
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    std::string out = "cpu: F16C ";
    out += yn(f.f16c && f.os_ymm);
    out += ", AVX-512-FP16 ";
    out += yn(f.avx512_fp16 && f.os_zmm);
    out += ", AVX-512-BF16 ";
    out += yn(f.avx512_bf16 && f.os_zmm);
    out += ", AMX-BF16 ";
    out += yn(f.amx_bf16 && f.amx_tile && f.os_amx);
    // bf16 and f16 matmuls: oneDNN (AMX or AVX512_BF16; f16 where this
    // oneDNN has it) or widened; the f16 element-wise ops: AVX512-FP16 or
    // widened (bf16's always widen).
    const std::string bf16_path = cpu::gemm_path(kBF16), f16_path = cpu::gemm_path(kF16);
    out += "; bf16 matmuls: ";
    out += bf16_path == "onednn-bf16" ? "native (oneDNN, fp32 accumulation" : "widened to f32 (";
    out += bf16_path == "onednn-bf16" ? (f.amx_bf16 && f.amx_tile && f.os_amx ? ", AMX)" : ", AVX512_BF16)")
                                      : std::string(cpu::gemm_bf16_widen_reason()) + ")";
    out += "; f16 matmuls: ";
    out += f16_path == "onednn-f16"         ? "native (oneDNN, fp32 accumulation)"
           : f16_path == "widen-onednn-f32" ? "widened to f32 (oneDNN f32 matmul)"
                                            : "widened to f32 (OpenBLAS sgemm)";
    const cpu::Decision ew = cpu::f16_elementwise_decision(f, cpu::env_isa_cap(), cpu::cpu_isa_cap(),
                                                           cpu::f16_native_avx512fp16() != nullptr);
    out += "; f16 add/sub/mul/div/max/min/neg/abs/relu/sqrt: ";
    out += *ew.reason == '\0' ? "native AVX512-FP16" : std::string("widened to f32 (") + ew.reason + ")";
    out += "; other 16-bit math widens to f32";
    out += "; fp8 (E4M3/E5M2) GEMMs are emulated: operands widened exactly, fp32 accumulation";
    return out;
  }
#if defined(HG_WITH_CUDA)
  if (!cuda::is_available() || device.index >= cuda::device_count()) return "cuda: no device available";
  const cudaDeviceProp& p = cuda::device_properties(device.index);
  const int cc = p.major * 10 + p.minor;
  return "cuda:" + std::to_string(device.index) + ": " + std::string(p.name) + ", compute capability " +
         std::to_string(p.major) + "." + std::to_string(p.minor) + ", tensor cores f16 " + (cc >= 70 ? "yes" : "no") +
         ", bf16 " + (cc >= 80 ? "yes" : "no") + ", fp8 " +
         (cc >= 89 ? "yes" : "no (fp8 GEMMs need sm_89 or newer; bf16 is the fallback)");
#else
  return "cuda: not built (cpu-only build)";
#endif
}

}  // namespace hg::amp
