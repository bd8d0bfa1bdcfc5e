// The CPU's ISA-dependent decisions (runtime/cpu/cpu_dispatch.h).
#include "runtime/cpu/cpu_dispatch.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/log.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define HG_X86_CPUID 1
#endif

namespace hg::cpu {

namespace {

bool bit(unsigned v, int b) { return ((v >> b) & 1u) != 0; }

// CPUID bits: Intel SDM vol. 2A, CPUID; XCR0 bits: vol. 1, 13.3.
CpuFeatures detect() {
  CpuFeatures f;
#if defined(HG_X86_CPUID)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  f.sse2 = bit(d, 26);
  f.fma = bit(c, 12);
  f.f16c = bit(c, 29);
  const bool osxsave = bit(c, 27);
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // XGETBV(0): needs no -mxsave
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  f.os_ymm = (xcr0 & 0x6) == 0x6;                // SSE + AVX state
  f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  f.os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG + XTILEDATA
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) {
    f.avx2 = bit(b, 5);
    f.avx512f = bit(b, 16);
    f.avx512dq = bit(b, 17);
    f.avx512bw = bit(b, 30);
    f.avx512vl = bit(b, 31);
    f.avx512_vnni = bit(c, 11);
    f.amx_bf16 = bit(d, 22);
    f.avx512_fp16 = bit(d, 23);
    f.amx_tile = bit(d, 24);
    f.amx_int8 = bit(d, 25);
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0) {
      f.avx512_bf16 = bit(a, 5);
      f.amx_fp16 = bit(a, 21);
    }
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_features_string(const CpuFeatures& f) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.sse2, "sse2");
  add(f.avx2 && f.os_ymm, "avx2");
  add(f.fma && f.os_ymm, "fma");
  add(f.f16c && f.os_ymm, "f16c");
  add(f.avx512f && f.os_zmm, "avx512f");
  add(f.avx512_bf16 && f.os_zmm, "avx512_bf16");
  add(f.avx512_fp16 && f.os_zmm, "avx512_fp16");
  add(f.amx_bf16 && f.amx_tile && f.os_amx, "amx_bf16");
  add(f.amx_fp16 && f.amx_tile && f.os_amx, "amx_fp16");
  return s.empty() ? "none" : s;
}

IsaCap parse_isa_cap(const char* value, bool* unknown) {
  if (unknown != nullptr) *unknown = false;
  if (value == nullptr || *value == '\0') return IsaCap::none;
  auto is = [&](const char* v) { return std::strcmp(value, v) == 0; };
  if (is("generic") || is("sse2")) return IsaCap::sse2;
  if (is("avx2")) return IsaCap::avx2;
  if (is("avx512")) return IsaCap::avx512;
  if (is("native") || is("avx512fp16")) return IsaCap::none;
  if (unknown != nullptr) *unknown = true;
  return IsaCap::none;
}

IsaCap env_isa_cap() {
  static const IsaCap cap = [] {
    const char* v = std::getenv("HG_CPU_ISA");
    bool unknown = false;
    const IsaCap c = parse_isa_cap(v, &unknown);
    if (unknown) HG_LOG_WARN("ignoring HG_CPU_ISA={} (expected generic, sse2, avx2, avx512, avx512fp16 or native)", v);
    return c;
  }();
  return cap;
}

VecIsa best_vec_isa(const CpuFeatures& f) {
  if (f.avx512f && f.os_zmm) return VecIsa::avx512;
  if (f.avx2 && f.fma && f.f16c && f.os_ymm) return VecIsa::avx2;
  return VecIsa::sse2;
}

Decision f16_elementwise_decision(const CpuFeatures& f, IsaCap cap, VecIsa vec_cap, bool built) {
  constexpr const char* kWiden = "widen";
  if (!built) return {kWiden, "this build has no AVX512-FP16 kernels (the compiler lacks -mavx512fp16)"};
  if (!(f.avx512_fp16 && f.avx512bw && f.avx512vl)) return {kWiden, "the CPU has no AVX512-FP16"};
  if (!f.os_zmm) return {kWiden, "the OS does not enable the AVX-512 register state"};
  if (cap != IsaCap::none) return {kWiden, "HG_CPU_ISA caps the ISA below AVX512-FP16"};
  if (vec_cap != VecIsa::avx512) return {kWiden, "the vector ISA is capped below AVX-512 (set_cpu_isa_cap)"};
  return {"native-avx512fp16", "", "AVX512-FP16 (vaddph, vmulph, vdivph, vsqrtph, ...)"};
}

OnednnIsa onednn_isa_for(const CpuFeatures& f) {
  const bool core = f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl && f.os_zmm;
  if (!core) return OnednnIsa::below_avx512;
  const bool bf16 = f.avx512_vnni && f.avx512_bf16;
  if (bf16 && f.amx_tile && f.amx_bf16 && f.amx_int8 && f.os_amx) return OnednnIsa::avx512_core_amx;
  if (bf16) return OnednnIsa::avx512_core_bf16;
  return OnednnIsa::avx512_core;
}

GemmDecision gemm_decision(const OnednnCaps& dnnl, const char* hg_cpu_gemm, bool isa_generic) {
  const auto gemm_is = [&](const char* v) { return hg_cpu_gemm != nullptr && std::strcmp(hg_cpu_gemm, v) == 0; };
  constexpr const char* kWidenHow = "widened to f32, OpenBLAS sgemm, one rounding";
  GemmDecision d{{"openblas", "", "OpenBLAS sgemm"}, {"widen-sgemm", "", kWidenHow}, {"widen-sgemm", "", kWidenHow}};
  if (gemm_is("widen")) {
    d.f32.reason = d.bf16.reason = d.f16.reason = "HG_CPU_GEMM=widen";
    return d;
  }
  if (isa_generic) {
    d.f32.reason = d.bf16.reason = d.f16.reason = "HG_CPU_ISA=generic";
    return d;
  }
  if (gemm_is("openblas")) {
    d.f32.reason = "HG_CPU_GEMM=openblas";
  } else if (dnnl.isa == OnednnIsa::below_avx512) {
    d.f32.reason = "the CPU has no AVX-512 (OpenBLAS was not measured against oneDNN there)";
  } else {
    d.f32 = {"onednn-f32", "", "oneDNN matmul, fp32 FMAs"};
  }
  if (dnnl.isa == OnednnIsa::avx512_core_amx) {
    d.bf16 = {"onednn-bf16", "", "oneDNN matmul on the AMX tiles (TDPBF16PS, fp32 accumulation)"};
  } else if (dnnl.isa == OnednnIsa::avx512_core_bf16) {
    d.bf16 = {"onednn-bf16", "", "oneDNN matmul with AVX512_BF16 (VDPBF16PS, fp32 accumulation)"};
  } else {
    d.bf16.reason = "the CPU has neither AVX512_BF16 nor AMX";
  }
  if (dnnl.f16_matmul) {
    d.f16 = {"onednn-f16", "", "oneDNN f16 matmul (fp32 accumulation, its default accumulation mode)"};
  } else {
    d.f16.reason = dnnl.isa == OnednnIsa::below_avx512
                       ? "the CPU has no AVX-512 (oneDNN's f16 matmul needs AVX512-FP16)"
                       : "this oneDNN has no f16 matmul on this CPU (oneDNN 2.6 has none; later ones on AVX512-FP16)";
  }
  // A 16-bit GEMM that widens multiplies on f32's path (oneDNN's f32 matmul
  // when f32 takes it; the early returns above leave f32 on OpenBLAS).
  for (Decision* w : {&d.bf16, &d.f16}) {
    if (std::strcmp(d.f32.path, "onednn-f32") == 0 && std::strcmp(w->path, "widen-sgemm") == 0) {
      w->path = "widen-onednn-f32";
      w->how = "widened to f32, oneDNN f32 matmul, one rounding";
    }
  }
  return d;
}

const char* conv_onednn_decision(DType dtype, const OnednnCaps& dnnl, ConvMode mode, bool isa_generic) {
  if (mode == ConvMode::im2col) return "HG_CPU_CONV=im2col";
  if (isa_generic) return "HG_CPU_ISA=generic";
  switch (dtype) {
    case DType::F32:
      if (mode == ConvMode::automatic && dnnl.isa == OnednnIsa::below_avx512)
        return "the CPU has no AVX-512 (im2col was not measured against oneDNN there; HG_CPU_CONV=onednn forces it)";
      return "";
    case DType::BF16:
      if (mode == ConvMode::automatic && dnnl.isa != OnednnIsa::avx512_core_bf16 &&
          dnnl.isa != OnednnIsa::avx512_core_amx)
        return "the CPU has neither AVX512_BF16 nor AMX (HG_CPU_CONV=onednn forces oneDNN)";
      return "";
    case DType::F16:
      if (!dnnl.f16_conv) return "this oneDNN has no f16 convolution on this CPU (it needs AVX512-FP16)";
      return "";
    case DType::F64:
      return "oneDNN has no f64 convolution";
    default:
      return "not a floating dtype";
  }
}

CpuFeatures sse2_features() {
  CpuFeatures f;
  f.sse2 = true;
  return f;
}

CpuFeatures avx2_features() {
  CpuFeatures f = sse2_features();
  f.avx2 = f.fma = f.f16c = f.os_ymm = true;
  return f;
}

CpuFeatures zen4_features() {
  CpuFeatures f = avx2_features();
  f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = f.avx512_vnni = f.avx512_bf16 = f.os_zmm = true;
  return f;
}

CpuFeatures sapphire_rapids_features() {
  CpuFeatures f = zen4_features();
  f.avx512_fp16 = true;
  f.amx_tile = f.amx_bf16 = f.amx_int8 = f.os_amx = true;
  return f;
}

}  // namespace hg::cpu
