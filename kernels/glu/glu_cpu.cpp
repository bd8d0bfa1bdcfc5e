// CPU reference for the gated linear units (kernels/glu/glu.h): one pass over the
// output elements, each widened to acc_t, computed by hg::glu_math (the same
// function the CUDA kernels call) and rounded once. Outer rows run in
// parallel above kParallelGrain output elements; every element is
// independent, so the result does not depend on the thread count.
#include <cstdint>

#include "core/convert.h"
#include "kernels/cpu/loops.h"
#include "kernels/glu/glu.h"

namespace hg::cpu {

void glu(OpId op, const Tensor& y, const Tensor& x) {
  const int64_t rows = y.size(0), half = y.size(1);
  const bool swiglu = op == OpId::swiglu;
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    parallel_for(rows, rows * half >= kParallelGrain, [&](int64_t r) {
      const T* a = xp + r * 2 * half;
      const T* b = a + half;
      T* out = yp + r * half;
      for (int64_t j = 0; j < half; ++j) {
        out[j] = convert_value<T>(glu_math::forward(swiglu, convert_value<A>(a[j]), convert_value<A>(b[j])));
      }
    });
  });
}

void glu_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& x) {
  const int64_t rows = d_y.size(0), half = d_y.size(1);
  const bool swiglu = op == OpId::swiglu;
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* gp = static_cast<const T*>(d_y.data_ptr());
    T* dp = static_cast<T*>(d_x.data_ptr());
    parallel_for(rows, rows * half >= kParallelGrain, [&](int64_t r) {
      const T* a = xp + r * 2 * half;
      const T* b = a + half;
      const T* g = gp + r * half;
      T* d_a = dp + r * 2 * half;
      T* d_b = d_a + half;
      for (int64_t j = 0; j < half; ++j) {
        A da, db;
        glu_math::backward(swiglu, convert_value<A>(g[j]), convert_value<A>(a[j]), convert_value<A>(b[j]), &da, &db);
        d_a[j] = convert_value<T>(da);
        d_b[j] = convert_value<T>(db);
      }
    });
  });
}

}  // namespace hg::cpu
