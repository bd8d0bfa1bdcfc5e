// uniform_, normal_, bernoulli_: argument checks, generator bookkeeping, and a
// contiguous staging tensor when the target is a strided view.
#include <cmath>

#include "core/copy.h"
#include "core/generator.h"
#include "kernels/random/random.h"

namespace hg::ops {

namespace {

void fill_random(const Tensor& t, RandomParams params, Generator* generator, const char* op) {
  HG_CHECK(t.defined(), op, ": the target is an undefined tensor");
  HG_CHECK(is_floating(t.dtype()) || (params.kind == RandomKind::kBernoulli && t.dtype() == kBool),
           op, " needs a floating tensor", params.kind == RandomKind::kBernoulli ? " (or bool)" : "",
           ", got ", t.dtype());
  Generator& gen = generator != nullptr ? *generator : default_generator();
  params.seed = gen.seed();
  params.offset = gen.next_offset();
  if (t.numel() > 0) {
    const Tensor target = t.is_contiguous() ? t : empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()});
#if defined(HG_WITH_CUDA)
    if (t.is_cuda()) {
      cuda::random_fill(target, params);
    } else {
      cpu::random_fill(target, params);
    }
#else
    cpu::random_fill(target, params);
#endif
    if (!same(target, t)) copy_into(t, target);
  }
  t.bump_version();
}

}  // namespace

void uniform_(const Tensor& t, double low, double high, Generator* generator) {
  HG_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, "uniform_: need finite low <= high, got [",
           low, ", ", high, ")");
  fill_random(t, {RandomKind::kUniform, 0, 0, static_cast<float>(low), static_cast<float>(high)}, generator,
              "uniform_");
}

void normal_(const Tensor& t, double mean, double std, Generator* generator) {
  HG_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0.0, "normal_: need a finite mean and std >= 0, got mean ",
           mean, " std ", std);
  fill_random(t, {RandomKind::kNormal, 0, 0, static_cast<float>(mean), static_cast<float>(std)}, generator,
              "normal_");
}

void bernoulli_(const Tensor& t, double p, Generator* generator) {
  HG_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_: probability must be in [0, 1], got ", p);
  fill_random(t, {RandomKind::kBernoulli, 0, 0, static_cast<float>(p), 0.0f}, generator, "bernoulli_");
}

}  // namespace hg::ops
