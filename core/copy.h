// Element copies between tensors: the one path behind contiguous(), clone(),
// to(dtype), to(device), copy_() and fill_().
//
// Note [Copy kernels]
// core/ implements the CPU copy and fill (strided, converting between any two
// dtypes with convert_value). A backend may register faster kernels for its
// device type (the CUDA backend registers its own strided copy/cast/fill
// kernels). Until one is registered, same-device copies on a non-CPU device
// stage both storages through host memory: correct but slow, and logged once.
// Cross-device copies first make a contiguous buffer in the destination dtype
// on the source device, move the bytes, then scatter on the destination.
#pragma once

#include "core/device.h"

namespace hg {

class Tensor;

// dst and src: same device, same sizes (the caller expands src), any dtypes.
using CopyKernel = void (*)(const Tensor& dst, const Tensor& src);
using FillKernel = void (*)(const Tensor& dst, double value);

void register_copy_kernel(DeviceType type, CopyKernel kernel);
void register_fill_kernel(DeviceType type, FillKernel kernel);

// dst[i] = convert(start + i * step) (computed in double), dst contiguous
// rank 1: hg::arange's kernel. The backends register theirs (kernels/cpu and
// kernels/cuda index files); without one arange fills on the host and copies.
using ArangeKernel = void (*)(const Tensor& dst, double start, double step);
void register_arange_kernel(DeviceType type, ArangeKernel kernel);
ArangeKernel arange_kernel(DeviceType type);  // nullptr when none is registered

// A faster host conversion between two contiguous tensors of different
// dtypes, with results identical to convert_value's: kernels/cpu registers one
// (vectorised, threaded 16-bit <-> f32: autocast's weight and gradient casts).
// It returns false for a dtype pair it does not handle; cpu::copy_strided
// then converts element by element.
using CpuConvertKernel = bool (*)(const Tensor& dst, const Tensor& src);
void register_cpu_convert_kernel(CpuConvertKernel kernel);

// dst <- src, broadcasting src to dst's shape and converting dtypes; any devices.
void copy_into(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);

namespace cpu {
void copy_strided(const Tensor& dst, const Tensor& src);  // same sizes, host memory
void fill_strided(const Tensor& dst, double value);
}  // namespace cpu

}  // namespace hg
