// CPU reference for the global gradient norm and the in-place rescale (Note
// [Global gradient norm] in kernels/grad_norm/grad_norm.h): the same chunks as the CUDA
// kernels, each chunk summed in a plain loop into its own f64 partial, the
// partials combined in chunk order. Chunks run in parallel but no partial
// depends on the thread count, so neither does the result.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/cpu/loops.h"
#include "kernels/grad_norm/grad_norm.h"

namespace hg::cpu {

namespace {

struct Chunk {
  const Tensor* grad;
  int64_t begin;
  int64_t n;
};

std::vector<Chunk> chunk_table(const std::vector<Tensor>& grads) {
  std::vector<Chunk> chunks;
  for (const Tensor& g : grads) {
    for (int64_t begin = 0; begin < g.numel(); begin += kGradNormChunk) {
      chunks.push_back({&g, begin, std::min(kGradNormChunk, g.numel() - begin)});
    }
  }
  return chunks;
}

// One chunk: each |g|^p in acc_t (as on the GPU), the running total in f64
// so that the reference stays exact to f32 output precision for any length.
template <typename G>
double chunk_partial(const Chunk& c, GradNormKind kind, double p) {
  using A = acc_t<G>;
  const G* g = static_cast<const G*>(c.grad->data_ptr()) + c.begin;
  double total = 0.0;
  for (int64_t k = 0; k < c.n; ++k) {
    const A a = std::fabs(static_cast<A>(g[k]));
    total = kind == GradNormKind::kInf ? grad_norm_combine(kind, total, static_cast<double>(a))
                                       : total + static_cast<double>(grad_norm_term(kind, static_cast<A>(p), a));
  }
  return total;
}

}  // namespace

void grad_norm(const std::vector<Tensor>& grads, GradNormKind kind, double p, float max_norm,
               const Tensor& total_norm, const Tensor& clip_coef) {
  const std::vector<Chunk> chunks = chunk_table(grads);
  const int64_t count = static_cast<int64_t>(chunks.size());
  std::vector<double> partials(chunks.size());
  parallel_for(count, count * kGradNormChunk >= kParallelGrain, [&](int64_t i) {
    partials[i] = dispatch_floating(chunks[i].grad->dtype(), "grad norm", [&](auto tag) {
      return chunk_partial<decltype(tag)>(chunks[i], kind, p);
    });
  });
  double total = 0.0;
  for (double partial : partials) total = grad_norm_combine(kind, total, partial);
  const float norm = static_cast<float>(grad_norm_finish(kind, p, total));
  total_norm.data<float>()[0] = norm;
  clip_coef.data<float>()[0] = clip_coefficient(max_norm, norm);
}

void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor) {
  const float coef = factor.data<float>()[0];
  if (coef == 1.0f) return;  // x * 1 == x: nothing to write
  for (const Tensor& g : grads) {
    dispatch_floating(g.dtype(), "scale_grads_", [&](auto tag) {
      using G = decltype(tag);
      using A = acc_t<G>;
      G* data = static_cast<G*>(g.data_ptr());
      const int64_t n = g.numel();
      parallel_for(n, n >= kParallelGrain,
                   [&](int64_t i) { data[i] = convert_value<G>(static_cast<A>(data[i]) * static_cast<A>(coef)); });
    });
  }
}

}  // namespace hg::cpu
