// The CPU's native bf16 GEMM through oneDNN (kernels/gemm/gemm_onednn.cpp;
// kernels/gemm/CPU.md, "CPU GEMM paths"). Compiled when the build found oneDNN
// (HG_HAVE_ONEDNN); kernels/gemm/gemm_cpu.cpp dispatches to it.
#pragma once

#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/gemm/gemm.h"

namespace hg::cpu {

// Whether bf16 GEMMs may take oneDNN in this process: the CPU has AVX512_BF16
// or AMX (oneDNN's ISA query) and neither HG_CPU_GEMM=widen nor
// HG_CPU_ISA=generic is set. Decided once, at first use.
bool native_bf16_gemm();
// Why not, when native_bf16_gemm() is false.
const char* native_bf16_gemm_reason();
// Whether f32 GEMMs take oneDNN: the CPU has AVX-512 and neither
// HG_CPU_GEMM=widen|openblas nor HG_CPU_ISA=generic is set.
bool native_f32_gemm();
const char* native_f32_gemm_reason();
// Whether f16 GEMMs take oneDNN: this oneDNN has a non-reference f16 matmul
// on this CPU (oneDNN 2.6 has none; later versions on AVX512-FP16 / AMX-FP16
// CPUs, with fp32 accumulation) and neither switch is set.
bool native_f16_gemm();
const char* native_f16_gemm_reason();
// The three decisions with what runs them (cpu::gemm_decision).
const GemmDecision& gemm_onednn_decision();

// Runs g through oneDNN's matmul (f32, bf16 or f16) and returns true, or
// returns false having done nothing (another dtype, that path off, or a shape
// oneDNN runs only on its reference kernels): the caller then widens (16-bit)
// or calls OpenBLAS (f32).
bool gemm_onednn(const GemmArgs& g);
// Whether gemm_onednn would run g (it then returns true).
bool gemm_onednn_takes(const GemmArgs& g);

}  // namespace hg::cpu
