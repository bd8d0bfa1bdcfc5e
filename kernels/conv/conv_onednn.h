// CPU convolution through oneDNN's convolution primitives
// (kernels/conv/conv_onednn.cpp; kernels/conv/CPU.md, "CPU convolution paths").
// Compiled when the build found oneDNN (HG_HAVE_ONEDNN); kernels/conv/conv_cpu.cpp
// tries it first and falls back to im2col + GEMM.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/conv/conv.h"

namespace hg::cpu {

// Why convolutions of this dtype do not take oneDNN in this process ("" when
// they do): HG_CPU_CONV=im2col, HG_CPU_ISA=generic, f64, no AVX-512 (f32) or
// AVX512_BF16/AMX (bf16) in auto mode, or no f16 convolution in this oneDNN.
// Decided once per process (the environment) and per dtype.
const char* conv_onednn_off_reason(DType dtype);

// Run the convolution through oneDNN and return true, or return false having
// written nothing (the dtype's path is off, or oneDNN has only its reference
// kernels, or none, for this shape): the caller then runs im2col. The
// arguments are conv2d_forward's / conv2d_backward's (kernels/conv/conv.h).
bool conv2d_forward_onednn(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const Conv2dParams& p);
bool conv2d_backward_onednn(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y, const Tensor& x,
                            const Tensor& w, const Conv2dParams& p);

// Process-wide count of the reorders executed around the primitives (an
// operand whose layout differs from the one the primitive chose).
int64_t conv_onednn_reorders();

}  // namespace hg::cpu
