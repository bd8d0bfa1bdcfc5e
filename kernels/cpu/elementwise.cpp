// CPU reference kernels for elementwise ops: unary, unary backward, binary,
// scalar, where, copy and fill. The numerical oracle for the CUDA kernels.
//
// The math of every op is its functor in kernels/elementwise_functors.h and
// the dispatch is kernels/elementwise_engine.h, both shared with the CUDA
// engine; this file plugs in the CPU loop (cpu::map_typed: OpenMP over
// contiguous operands, an odometer over strided ones).
//
// Precision contract: 16-bit values are widened to float, the math runs in
// float (double for f64), and the result is rounded once on store. Integer
// ops run in the integer type. NaN in, NaN out for every floating op.
#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/elementwise_engine.h"

namespace hg::cpu {

namespace {

struct CpuLoop {
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char* /*name*/, const Fn& fn, const Tensor& out, const Tensors&... ins) {
    map_typed<Out, In...>(out, fn, ins...);
  }
};
using Engine = ew::Engine<CpuLoop>;

}  // namespace

HG_ELEMENTWISE_BACKEND_ENTRIES(Engine)  // unary, unary_backward, binary, binary_scalar, where

void copy(const Tensor& dst, const Tensor& src) { copy_strided(dst, src); }
void fill(const Tensor& dst, double value) { fill_strided(dst, value); }

}  // namespace hg::cpu
