// The CPU's ISA-dependent decisions as pure functions of (CPU features,
// switches), so that tests can ask what a CPU they do not run on would get
// (kernels/cpu/README.md, "CPU math: SLEEF and ISA dispatch"): the vector math ISA
// (kernels/cpu/vec_math.h), native f16 element-wise (kernels/elementwise/f16_native.h),
// the GEMM paths (kernels/gemm/gemm_onednn.h) and the oneDNN convolution
// (kernels/conv/conv_onednn.h). The dispatchers call them with
// cpu_features() and the environment; nothing here depends on oneDNN.
#pragma once

#include <string>

#include "core/dtype.h"

namespace hg::cpu {

// The vector ISAs the ISA-dispatched kernels are compiled for (kernels/cpu/vec_math.h).
enum class VecIsa { sse2, avx2, avx512 };

// What CPUID and XCR0 (XGETBV) report; read once by cpu_features().
struct CpuFeatures {
  bool sse2 = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false, avx512_vnni = false;
  bool avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false, amx_fp16 = false;
  // The register state the OS saves (XCR0): YMM (AVX), ZMM and opmasks
  // (AVX-512), the AMX tiles (XTILECFG + XTILEDATA).
  bool os_ymm = false, os_zmm = false, os_amx = false;
};

// This machine's features (CPUID, XGETBV; all false off x86-64).
const CpuFeatures& cpu_features();
// "avx512f avx512_bf16 ..." for a capability line.
std::string cpu_features_string(const CpuFeatures& f);

// The HG_CPU_ISA switch: the widest ISA the ISA-dispatched kernels may use.
//   generic | sse2   the SSE2 baseline (also the generic 16-bit converters and
//                    no oneDNN paths)
//   avx2             at most AVX2 + FMA + F16C
//   avx512           at most AVX-512F (no AVX512-FP16 arithmetic)
//   native | avx512fp16 | unset   no cap (AVX512-FP16 where the CPU has it)
enum class IsaCap { sse2, avx2, avx512, none };
// The cap an HG_CPU_ISA value asks for; nullptr is unset. An unknown value
// is no cap, with *unknown set (the caller logs it).
IsaCap parse_isa_cap(const char* value, bool* unknown = nullptr);
// HG_CPU_ISA as read once at first use.
IsaCap env_isa_cap();

// The widest vector math ISA the CPU runs (AVX-512F with the ZMM state, else
// AVX2 + FMA + F16C with the YMM state, else SSE2).
VecIsa best_vec_isa(const CpuFeatures& f);

// A decision: the path taken, why not a faster one ("" when it is the best
// path), and what runs it (the instructions, for capability lines).
struct Decision {
  const char* path;
  const char* reason;
  const char* how = "";
};

// Contiguous f16 add/sub/mul/div/maximum/minimum and neg/abs/relu/sqrt:
// "native-avx512fp16" where the CPU has AVX512-FP16 (+ BW, VL) with the ZMM
// state, the build has the kernels and nothing caps the ISA below it; else
// "widen" (f32 math, one rounding: the same bits). vec_cap is the vector
// math's run-time cap (cpu::set_cpu_isa_cap), which also turns it off.
Decision f16_elementwise_decision(const CpuFeatures& f, IsaCap cap, VecIsa vec_cap, bool built);

// oneDNN's ISA classes, as its get_effective_cpu_isa() ranks them (the ones
// the decisions below tell apart).
enum class OnednnIsa { below_avx512, avx512_core, avx512_core_bf16, avx512_core_amx };
// What oneDNN detects on a CPU with these features (its own rules: AVX-512
// core = F + DQ + BW + VL; bf16 adds VNNI and AVX512_BF16; AMX adds the
// tiles with BF16 and INT8 and their OS state).
OnednnIsa onednn_isa_for(const CpuFeatures& f);

// What the oneDNN build offers beyond its ISA: a non-reference f16 matmul /
// convolution on this CPU (asked by creating one; oneDNN 2.6 has neither on
// any CPU, later versions on AVX512-FP16 / AMX-FP16 CPUs, keeping fp32
// accumulation: kernels/gemm/CPU.md, "CPU GEMM paths").
struct OnednnCaps {
  OnednnIsa isa = OnednnIsa::below_avx512;
  bool f16_matmul = false;
  bool f16_conv = false;
};

// The CPU GEMM path per dtype ("onednn-f32" / "openblas", "onednn-bf16" /
// "widen-sgemm", "onednn-f16" / "widen-sgemm") given oneDNN's caps, the
// HG_CPU_GEMM value (nullptr: unset) and whether HG_CPU_ISA=generic.
struct GemmDecision {
  Decision f32, bf16, f16;
};
GemmDecision gemm_decision(const OnednnCaps& dnnl, const char* hg_cpu_gemm, bool isa_generic);

// Why convolutions of dtype do not take oneDNN ("" when they do), given the
// HG_CPU_CONV mode (its parsed value) and HG_CPU_ISA=generic.
enum class ConvMode { automatic, im2col, onednn };
const char* conv_onednn_decision(DType dtype, const OnednnCaps& dnnl, ConvMode mode, bool isa_generic);

// Forced feature sets for the tests: a Sapphire Rapids-class Xeon (AVX-512
// with BF16 and FP16, AMX-BF16/INT8), a Zen 4 (AVX-512 with BF16, no FP16, no
// AMX), an AVX2-only CPU and the x86-64 baseline.
CpuFeatures sapphire_rapids_features();
CpuFeatures zen4_features();
CpuFeatures avx2_features();
CpuFeatures sse2_features();

}  // namespace hg::cpu
