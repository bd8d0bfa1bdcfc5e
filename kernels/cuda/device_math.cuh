// Device math in the accumulation type for the CUDA kernels: the shared
// definitions of kernels/scalar_math.h (acc_t<T>, NaN-propagating max/min and
// float/double libm overloads) under the names the CUDA files use.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/half.h"
#include "kernels/scalar_math.h"

namespace hg::cuda {

using ::hg::acc_t;
using ::hg::max_nan;
using ::hg::min_nan;
namespace dmath = ::hg::smath;

}  // namespace hg::cuda
