// CUDA element-wise binary ops (tensor and scalar operands) and where: the engine's entries (kernels/elementwise/elementwise_engine.h)
// over launch_map (kernels/elementwise/elementwise.cuh). One of the three files of
// the CUDA element-wise ops (see kernels/elementwise/elementwise.cu); the math of
// every op is its functor in kernels/elementwise/elementwise_functors.h.
//
// Precision contract: 16-bit inputs are widened to float, the math runs in
// acc_t (float; double for f64), one rounding on store. NaN propagates through
// every floating op (relu, maximum, minimum and clamp included).
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/elementwise/elementwise_engine.h"

namespace hg::cuda {

HG_ELEMENTWISE_BINARY_ENTRIES(ew::Engine<CudaLoop>)  // binary, binary_scalar, where

}  // namespace hg::cuda
