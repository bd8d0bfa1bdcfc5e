#include "autograd/gradcheck.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"

namespace hg {

namespace {

double projected(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                 const Tensor& v) {
  NoGradGuard no_grad;
  const Tensor y = fn(inputs);
  const std::vector<double> yv = y.to(kF64).to_vector<double>();
  const std::vector<double> vv = v.to_vector<double>();
  double total = 0.0;
  for (size_t i = 0; i < yv.size(); ++i) total += yv[i] * vv[i];
  return total;
}

}  // namespace

std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                      const GradcheckOptions& options) {
  for (const Tensor& t : inputs) {
    HG_CHECK(!t.defined() || !t.requires_grad() || (t.dtype() == kF64 && t.is_cpu() && t.is_leaf()),
             "gradcheck: inputs that require grad must be f64 CPU leaf tensors, got ", t.dtype(), " on ", t.device());
  }
  for (const Tensor& t : inputs) {
    if (t.defined()) t.impl_ptr()->grad.reset();
  }
  const Tensor y = fn(inputs);
  HG_CHECK(y.requires_grad(), "gradcheck: the function's output does not require grad");
  Generator gen(options.seed);
  const Tensor v = randn(y.sizes(), {.dtype = kF64}, &gen);
  y.backward(v.to(y.dtype()));

  std::ostringstream report;
  report.precision(10);
  int failures = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const Tensor analytic = x.grad().defined() ? x.grad().contiguous() : zeros_like(x);
    const std::vector<double> a = analytic.to_vector<double>();
    double* data = x.data<double>();
    // Element e of the logical view lives at storage offset `offsets[e]`.
    for (int64_t e = 0; e < x.numel(); ++e) {
      // Walk the strides to the e-th element (row-major over sizes).
      int64_t rem = e, off = 0;
      for (int64_t d = x.dim() - 1; d >= 0; --d) {
        off += (rem % x.size(d)) * x.stride(d);
        rem /= x.size(d);
      }
      const double saved = data[off];
      data[off] = saved + options.eps;
      const double plus = projected(fn, inputs, v);
      data[off] = saved - options.eps;
      const double minus = projected(fn, inputs, v);
      data[off] = saved;
      const double numeric = (plus - minus) / (2.0 * options.eps);
      const double analytic_e = a[static_cast<size_t>(e)];
      if (!(std::fabs(analytic_e - numeric) <= options.atol + options.rtol * std::fabs(numeric))) {
        if (failures++ < 5) {
          report << "  input " << k << " element " << e << ": analytic " << analytic_e << " numeric " << numeric
                 << "\n";
        }
      }
    }
  }
  if (failures == 0) return "";
  return "gradcheck failed for " + std::to_string(failures) + " element(s):\n" + report.str();
}

}  // namespace hg
