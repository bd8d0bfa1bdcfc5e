// Shared helpers for kernel tests: the devices and dtypes to sweep, seeded
// inputs in a chosen value domain, non-contiguous layouts, and reading values
// back as doubles.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "tests/kernels/tolerance.h"

namespace hg::test {

// cpu always; cuda:0 when the CUDA backend is built (emu or gpu).
inline std::vector<Device> test_devices() {
  std::vector<Device> devices{Device::cpu()};
#if defined(HG_WITH_CUDA)
  devices.push_back(Device::cuda(0));
#endif
  return devices;
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> dtypes{kF32, kF16, kBF16, kF64};
  return dtypes;
}

enum class Domain { kAny, kPositive, kExtreme };

// Values the extreme samples cycle through: zeros, ones, the fp16 range edges,
// tiny numbers, infinities and NaN.
inline const std::vector<double>& extreme_values() {
  static const std::vector<double> values{0.0,  -0.0,     1.0,       -1.0,  60000.0, -60000.0,
                                          1e-5, -3e-5,    65504.0,   0.5,   INFINITY, -INFINITY,
                                          NAN,  5.96e-8,  -1000.0,   1000.0, 20.0,   -20.0};
  return values;
}

// A host tensor of `shape` in `dtype`, values from the domain (seeded).
inline Tensor make_input(const Shape& shape, DType dtype, Domain domain, uint64_t seed) {
  Generator gen(seed);
  Tensor u = rand(shape, {.dtype = kF64}, &gen);  // [0, 1)
  std::vector<double> v = u.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (domain) {
      case Domain::kAny: v[i] = v[i] * 6.0 - 3.0; break;
      case Domain::kPositive: v[i] = 0.05 + v[i] * 4.0; break;
      case Domain::kExtreme: v[i] = extreme_values()[(i + seed) % extreme_values().size()]; break;
    }
  }
  return from_vector(v, shape, {.dtype = dtype});
}

// Same values, laid out so the returned view is not contiguous (the last two
// dims are stored transposed). Rank < 2 tensors come back as a stride-2 slice.
inline Tensor make_noncontiguous(const Tensor& t) {
  if (t.dim() >= 2) {
    return t.transpose(-1, -2).contiguous().transpose(-1, -2);
  }
  if (t.dim() == 1 && t.numel() > 0) {
    Tensor wide = zeros({t.numel() * 2}, {.dtype = t.dtype(), .device = t.device()});
    wide.slice(0, 0, t.numel() * 2, 2).copy_(t);
    return wide.slice(0, 0, t.numel() * 2, 2);
  }
  return t;
}

inline std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

// Rounds each double to `dtype` and back: the reference a kernel writing that
// dtype should reproduce.
inline std::vector<double> round_to(const std::vector<double>& v, DType dtype) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, {.dtype = kF64}).to(dtype).to_vector<double>();
}

inline std::string label(Device device, DType dtype, const std::string& what) {
  return device.str() + " " + std::string(dtype_name(dtype)) + " " + what;
}

}  // namespace hg::test
