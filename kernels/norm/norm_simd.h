// Vectorised layer_norm / rms_norm rows for the CPU (kernels/norm/norm_cpu.cpp;
// kernels/norm/README.md, "Normalisation: layer_norm and rms_norm").
//
// The row kernels are written once over the GCC vector type of
// kernels/cpu/vec_math_impl.h (kernels/norm/norm_simd_impl.h) and compiled with
// the vector math kernels for each ISA (SSE2, AVX2+FMA+F16C, AVX-512F); the
// same switches choose them (HG_CPU_MATH=scalar: none, the scalar reference
// rows of norm.cpp; HG_CPU_ISA=generic / avx2: the cap). x, y, d_y and d_x are
// f32, f16 or bf16 (VecType t), read a vector at a time and, for 16-bit,
// widened and rounded in the registers: no f32 copy of a row is made. The
// statistics, weights, biases and parameter partials are f32.
#pragma once

#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace hg::cpu {

struct VecNormTable {
  const char* name;
  // rows consecutive rows of cols values (x, y contiguous [rows, cols]):
  // mean[r] (not written for rms; mean may be null then), rstd[r] and
  // y = (x - mean) * rstd * w + b, w and b each null when absent.
  void (*forward_rows)(VecType t, bool rms, const void* x, void* y, float* mean, float* rstd, const float* w,
                       const float* b, int64_t rows, int64_t cols, float eps);
  // The backward of the same rows from the forward's mean (null for rms) and
  // rstd: d_x (when not null) = rstd * (g - mean(g) - xhat * mean(g * xhat)),
  // g = d_y * w (d_y when w is null); and, when not null, d_w_part[c] +=
  // d_y * xhat and d_b_part[c] += d_y for each row in order (the stage-1
  // partials of norm_math::norm_column_chunks; the caller zeroes them).
  void (*backward_rows)(VecType t, bool rms, const void* d_y, const void* x, const float* mean, const float* rstd,
                        const float* w, void* d_x, float* d_w_part, float* d_b_part, int64_t rows, int64_t cols);
};

// The row kernels to use now (vec_math()'s ISA), or nullptr for the scalar path.
const VecNormTable* vec_norm();

}  // namespace hg::cpu
