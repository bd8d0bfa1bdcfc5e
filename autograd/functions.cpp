// Differentiable elementwise, reduction, GEMM, softmax and gated-unit ops. Each forward is
// followed by its backward; closures capture only what they use.
#include "autograd/functions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "kernels/gemm/gemm.h"
#include "kernels/glu/glu.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"
#include "kernels/softmax/softmax.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;
using autograd::SavedTensor;

namespace {

// out = op(x) for a unary op; backward = d_out * op'(saved), the derivative in
// the op's functor (kernels/elementwise/elementwise_functors.h), which also says whether
// it reads x, y or neither; only that one is saved.
Tensor unary_op(OpId op, const Tensor& x, const ScalarArgs& args = {}) {
  HG_AUTOCAST(op, [&](const Tensor& in) { return unary_op(op, in, args); }, x);  // Note [Autocast]
  Tensor y = ops::unary(op, x, args);
  if (any_requires_grad({&x})) {
    const GradFrom from = ops::unary_grad_from(op);
    const Tensor saved = from == GradFrom::input ? x : from == GradFrom::output ? y : Tensor();
    record(op_name(op).data(), y, {&x}, {SavedTensor(saved)},
           [op, args](const Tensor& g, const FunctionNode& self) -> Grads {
             return {ops::unary_backward(op, g, self.saved(0), args)};
           });
  }
  return y;
}

}  // namespace

// ---- elementwise --------------------------------------------------------------------------

Tensor neg(const Tensor& x) { return unary_op(OpId::neg, x); }
Tensor exp(const Tensor& x) { return unary_op(OpId::exp, x); }
Tensor log(const Tensor& x) { return unary_op(OpId::log, x); }
Tensor sqrt(const Tensor& x) { return unary_op(OpId::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op(OpId::rsqrt, x); }
Tensor abs(const Tensor& x) { return unary_op(OpId::abs, x); }
Tensor tanh(const Tensor& x) { return unary_op(OpId::tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(OpId::sigmoid, x); }
Tensor relu(const Tensor& x) { return unary_op(OpId::relu, x); }
Tensor silu(const Tensor& x) { return unary_op(OpId::silu, x); }
Tensor gelu(const Tensor& x, bool tanh_approx) { return unary_op(tanh_approx ? OpId::gelu_tanh : OpId::gelu, x); }
Tensor erf(const Tensor& x) { return unary_op(OpId::erf, x); }
Tensor round(const Tensor& x) { return unary_op(OpId::round, x); }
Tensor floor(const Tensor& x) { return unary_op(OpId::floor, x); }
Tensor trunc(const Tensor& x) { return unary_op(OpId::trunc, x); }

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  HG_CHECK(min.has_value() || max.has_value(),
           "clamp: at least one of min and max must be given (like torch.clamp)");
  return unary_op(OpId::clamp, x,
                  {min.value_or(-std::numeric_limits<double>::infinity()),
                   max.value_or(std::numeric_limits<double>::infinity())});
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  HG_CHECK(beta != 0.0 && std::isfinite(beta), "softplus: beta must be finite and non-zero, got ", beta);
  return unary_op(OpId::softplus, x, {beta, threshold});
}

Tensor pow(const Tensor& x, double exponent) {
  HG_AUTOCAST(OpId::pow, [&](const Tensor& in) { return pow(in, exponent); }, x);  // Note [Autocast]
  Tensor y = ops::pow(x, exponent);
  if (any_requires_grad({&x})) {
    record("pow", y, {&x}, {SavedTensor(x)}, [exponent](const Tensor& g, const FunctionNode& self) -> Grads {
      if (exponent == 0.0) return {zeros_like(g)};
      const Tensor d = ops::binary_scalar(OpId::mul, ops::pow(self.saved(0), exponent - 1.0), exponent);
      return {ops::mul(g, d)};
    });
  }
  return y;
}

Tensor add(const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(OpId::add, [&](const Tensor& p, const Tensor& q) { return add(p, q); }, a, b);  // Note [Autocast]
  Tensor y = ops::add(a, b);
  if (any_requires_grad({&a, &b})) {
    record("add", y, {&a, &b}, {},
           [sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype()](const Tensor& g, const FunctionNode&) -> Grads {
             return {sum_to(g, sa).to(da), sum_to(g, sb).to(db)};
           });
  }
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(OpId::sub, [&](const Tensor& p, const Tensor& q) { return sub(p, q); }, a, b);  // Note [Autocast]
  Tensor y = ops::sub(a, b);
  if (any_requires_grad({&a, &b})) {
    record("sub", y, {&a, &b}, {},
           [sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype()](const Tensor& g, const FunctionNode&) -> Grads {
             return {sum_to(g, sa).to(da), sum_to(ops::neg(g), sb).to(db)};
           });
  }
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(OpId::mul, [&](const Tensor& p, const Tensor& q) { return mul(p, q); }, a, b);  // Note [Autocast]
  Tensor y = ops::mul(a, b);
  if (any_requires_grad({&a, &b})) {
    // d(a*b)/da = b and /db = a: save each only if the other side needs it.
    const bool need_a = b.requires_grad(), need_b = a.requires_grad();
    record("mul", y, {&a, &b}, {SavedTensor(need_a ? a : Tensor()), SavedTensor(need_b ? b : Tensor())},
           [sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype(), need_a, need_b](
               const Tensor& g, const FunctionNode& self) -> Grads {
             Grads out(2);
             if (need_b) out[0] = sum_to(ops::mul(g, self.saved(1)), sa).to(da);
             if (need_a) out[1] = sum_to(ops::mul(g, self.saved(0)), sb).to(db);
             return out;
           });
  }
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(OpId::div, [&](const Tensor& p, const Tensor& q) { return div(p, q); }, a, b);  // Note [Autocast]
  Tensor y = ops::div(a, b);
  if (any_requires_grad({&a, &b})) {
    record("div", y, {&a, &b}, {SavedTensor(b), SavedTensor(b.requires_grad() ? y : Tensor())},
           [sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype(), need_a = a.requires_grad(),
            need_b = b.requires_grad()](const Tensor& g, const FunctionNode& self) -> Grads {
             Grads out(2);
             const Tensor bs = self.saved(0);
             const Tensor g_over_b = ops::div(g, bs);
             if (need_a) out[0] = sum_to(g_over_b, sa).to(da);
             if (need_b) out[1] = sum_to(ops::neg(ops::mul(g_over_b, self.saved(1))), sb).to(db);  // -g a / b^2
             return out;
           });
  }
  return y;
}

namespace {
// Gradient of max/min(a, b): the winner gets g, a tie splits it in half.
Tensor extremum(OpId op, OpId wins, const char* name, const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(op, [&](const Tensor& p, const Tensor& q) { return extremum(op, wins, name, p, q); }, a, b);  // Note [Autocast]
  Tensor y = ops::binary(op, a, b);
  if (any_requires_grad({&a, &b})) {
    record(name, y, {&a, &b}, {SavedTensor(a), SavedTensor(b)},
           [wins, sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype()](
               const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor as = self.saved(0), bs = self.saved(1);
             const Tensor a_share = ops::add(ops::binary(wins, as, bs).to(g.dtype()),
                                             ops::binary_scalar(OpId::mul, ops::binary(OpId::eq, as, bs).to(g.dtype()), 0.5));
             const Tensor ga = ops::mul(g, a_share);
             const Tensor gb = ops::sub(g, ga);
             return {sum_to(ga, sa).to(da), sum_to(gb, sb).to(db)};
           });
  }
  return y;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(OpId::maximum, OpId::gt, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(OpId::minimum, OpId::lt, "minimum", a, b); }

Tensor add(const Tensor& a, double b) {
  const profiler::OpScope profiled("add_scalar", a);  // Note [Profiler]
  Tensor y = ops::binary_scalar(OpId::add, a, b);
  if (any_requires_grad({&a})) {
    record("add_scalar", y, {&a}, {}, [da = a.dtype()](const Tensor& g, const FunctionNode&) -> Grads { return {g.to(da)}; });
  }
  return y;
}

Tensor mul(const Tensor& a, double b) {
  const profiler::OpScope profiled("mul_scalar", a);  // Note [Profiler]
  Tensor y = ops::binary_scalar(OpId::mul, a, b);
  if (any_requires_grad({&a})) {
    record("mul_scalar", y, {&a}, {}, [b, da = a.dtype()](const Tensor& g, const FunctionNode&) -> Grads {
      return {ops::binary_scalar(OpId::mul, g, b).to(da)};
    });
  }
  return y;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  HG_AUTOCAST(OpId::where, [&](const Tensor& c, const Tensor& p, const Tensor& q) { return where(c, p, q); }, cond, a, b);  // Note [Autocast]
  Tensor y = ops::where(cond, a, b);
  if (any_requires_grad({&a, &b})) {
    record("where", y, {&a, &b}, {SavedTensor(cond)},
           [sa = a.sizes(), sb = b.sizes(), da = a.dtype(), db = b.dtype()](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor c = self.saved(0);
             const Tensor zero = zeros({}, {.dtype = g.dtype(), .device = g.device()});
             return {sum_to(ops::where(c, g, zero), sa).to(da), sum_to(ops::where(c, zero, g), sb).to(db)};
           });
  }
  return y;
}

// ---- reductions ----------------------------------------------------------------------------

namespace {

// The reduced dims of x (all when `dims` is empty), wrapped and sorted.
std::vector<int64_t> reduced_dims(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
  } else {
    for (int64_t d : dims) out.push_back(wrap_dim(d, x.dim(), "reduction"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Reshapes a reduced gradient (keepdim or not) so it broadcasts against x.
Tensor unreduce(const Tensor& g, const Shape& x_shape, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor shaped = g;
  if (!keepdim) {
    for (int64_t d : dims) shaped = shaped.unsqueeze(d);
  }
  return shaped.expand(x_shape);
}

int64_t count_of(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  HG_AUTOCAST(OpId::sum, [&](const Tensor& in) { return sum(in, dims, keepdim); }, x);  // Note [Autocast]
  Tensor y = ops::sum(x, dims, keepdim);
  if (any_requires_grad({&x})) {
    record("sum", y, {&x}, {}, [shape = x.sizes(), rd = reduced_dims(x, dims), keepdim](const Tensor& g, const FunctionNode&) -> Grads {
      return {unreduce(g, shape, rd, keepdim).contiguous()};
    });
  }
  return y;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  HG_AUTOCAST(OpId::mean, [&](const Tensor& in) { return mean(in, dims, keepdim); }, x);  // Note [Autocast]
  Tensor y = ops::mean(x, dims, keepdim);
  if (any_requires_grad({&x})) {
    const std::vector<int64_t> rd = reduced_dims(x, dims);
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(count_of(x.sizes(), rd), 1));
    record("mean", y, {&x}, {}, [shape = x.sizes(), rd, keepdim, scale](const Tensor& g, const FunctionNode&) -> Grads {
      return {ops::binary_scalar(OpId::mul, unreduce(g, shape, rd, keepdim), scale)};
    });
  }
  return y;
}

namespace {
Tensor extreme_reduce(OpId op, const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  HG_AUTOCAST(op, [&](const Tensor& in) { return extreme_reduce(op, name, in, dims, keepdim); }, x);  // Note [Autocast]
  Tensor y = ops::reduce(op, x, dims, keepdim);
  if (any_requires_grad({&x})) {
    record(name, y, {&x}, {SavedTensor(x), SavedTensor(y)},
           [rd = reduced_dims(x, dims), keepdim](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor xs = self.saved(0);
             const Tensor ys = unreduce(self.saved(1), xs.sizes(), rd, keepdim);
             // Every element equal to the extremum shares the gradient evenly.
             const Tensor mask = ops::binary(OpId::eq, xs, ys).to(g.dtype());
             const Tensor count = ops::sum(mask, rd, true);
             return {ops::mul(ops::div(unreduce(g, xs.sizes(), rd, keepdim), unreduce(count, xs.sizes(), rd, true)), mask)};
           });
  }
  return y;
}
}  // namespace

Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme_reduce(OpId::max, "max", x, dims, keepdim);
}
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme_reduce(OpId::min, "min", x, dims, keepdim);
}

Tensor norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  HG_AUTOCAST(OpId::norm, [&](const Tensor& in) { return norm(in, dims, keepdim); }, x);  // Note [Autocast]
  Tensor y = ops::norm(x, dims, keepdim);
  if (any_requires_grad({&x})) {
    record("norm", y, {&x}, {SavedTensor(x), SavedTensor(y)},
           [rd = reduced_dims(x, dims), keepdim](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor xs = self.saved(0);
             // d||x|| = x / ||x|| (0 where the norm is 0, as in torch's subgradient)
             const Tensor n = unreduce(self.saved(1), xs.sizes(), rd, keepdim);
             const Tensor safe = ops::where(ops::binary_scalar(OpId::eq, n, 0.0),
                                            ones({}, {.dtype = n.dtype(), .device = n.device()}), n);
             return {ops::mul(unreduce(g, xs.sizes(), rd, keepdim), ops::div(xs, safe))};
           });
  }
  return y;
}

// ---- GEMM ------------------------------------------------------------------------------------

namespace {
// out = op(a) op(b) (+ bias): gradients with the transposes folded into flags.
Tensor matmul_impl(const char* name, const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor& bias) {
  HG_AUTOCAST(OpId::matmul, [&](const Tensor& p, const Tensor& q, const Tensor& r) { return matmul_impl(name, p, q, ta, tb, r); }, a, b, bias);  // Note [Autocast]
  Tensor y = ops::matmul(a, b, ta, tb, bias);
  if (any_requires_grad({&a, &b, &bias})) {
    record(name, y, {&a, &b, bias.defined() ? &bias : nullptr},
           {SavedTensor(b.requires_grad() ? a : Tensor()), SavedTensor(a.requires_grad() ? b : Tensor())},
           [ta, tb, sa = a.sizes(), sb = b.sizes(), need_a = a.requires_grad(), need_b = b.requires_grad(),
            need_bias = bias.defined() && bias.requires_grad(), bias_shape = bias.defined() ? bias.sizes() : Shape{},
            bias_dtype = bias.defined() ? bias.dtype() : kF32](const Tensor& g, const FunctionNode& self) -> Grads {
             Grads out(3);
             if (need_a) {
               const Tensor bs = self.saved(1);
               out[0] = sum_to(ta ? ops::matmul(bs, g, tb, true) : ops::matmul(g, bs, false, !tb), sa);
             }
             if (need_b) {
               const Tensor as = self.saved(0);
               out[1] = sum_to(tb ? ops::matmul(g, as, true, ta) : ops::matmul(as, g, !ta, false), sb);
             }
             if (need_bias) out[2] = sum_to(g, bias_shape).to(bias_dtype);
             return out;
           });
  }
  return y;
}
}  // namespace

namespace {
// Whether the leading dims of x (all but the last) merge into one dim by
// strides alone, so x.reshape({-1, K}) is a view (size-1 dims take any stride).
bool rows_fold(const Tensor& x) {
  int64_t expected = -1;
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (expected >= 0 && x.stride(d) != expected) return false;
    expected = x.stride(d) * x.size(d);
  }
  return true;
}

// Note [Folded linear layers]
// x [..., K] against a 2-D weight is one [prod(...), K] matrix: the forward,
// dX and dW are each ONE 2-D GEMM, and dW = g^T @ x sums over every leading
// position inside the GEMM (fp32 accumulation over B*T, one rounding) instead
// of a batched GEMM producing [B, out, in] partials that sum_to then reduces.
// The fold is a view when the leading dims merge by strides (any contiguous
// input); linear folds a non-mergeable input through a copy (one read and
// write of x, cheaper than B weight-sized partials), matmul keeps the batched
// GEMM for such an input.
Tensor folded_matmul(const char* name, const Tensor& a, const Tensor& b, bool tb, const Tensor& bias) {
  Shape out_shape = a.sizes();
  out_shape.back() = tb ? b.size(0) : b.size(1);
  const Tensor flat = reshape(a, {-1, a.size(-1)});
  return reshape(matmul_impl(name, flat, b, false, tb, bias), out_shape);
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  HG_CHECK(a.defined() && b.defined(), "matmul: both operands must be defined tensors");
  HG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must have at least 1 dim, got ", a.shape_str(), " and ",
           b.shape_str());
  // torch.matmul's vector rules: a 1-D a is a row [1, K] (that dim dropped from
  // the result), a 1-D b a column [K, 1] (likewise).
  if (a.dim() == 1 || b.dim() == 1) {
    const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
    const Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
    Tensor y = matmul(a2, b2);
    if (b.dim() == 1) y = squeeze(y, -1);
    if (a.dim() == 1) y = squeeze(y, -2 + (b.dim() == 1 ? 1 : 0));
    return y;
  }
  // [..., M, K] @ [K, N]: one 2-D GEMM per direction (Note [Folded linear layers]).
  if (a.dim() > 2 && b.dim() == 2 && a.size(-1) == b.size(0) && rows_fold(a)) {
    return folded_matmul("matmul", a, b, false, Tensor());
  }
  return matmul_impl("matmul", a, b, false, false, Tensor());
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  HG_CHECK(a.defined() && b.defined() && a.dim() == 3 && b.dim() == 3,
           "bmm: operands must be 3-D [B, M, K] and [B, K, N] (use matmul to broadcast), got ",
           a.defined() ? a.shape_str() : "undefined", " and ", b.defined() ? b.shape_str() : "undefined");
  HG_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", a.shape_str(), " @ ", b.shape_str(),
           " (bmm does not broadcast; use matmul)");
  HG_CHECK(a.size(2) == b.size(1), "bmm: inner dims differ: ", a.shape_str(), " @ ", b.shape_str());
  return matmul_impl("bmm", a, b, false, false, Tensor());
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  HG_CHECK(weight.dim() == 2, "linear: weight must be [out_features, in_features], got ", weight.shape_str());
  HG_CHECK(x.defined() && x.dim() >= 1, "linear: input must be a defined tensor with at least 1 dim");
  if (x.dim() == 2) return matmul_impl("linear", x, weight, false, true, bias);
  HG_CHECK(x.size(-1) == weight.size(1), "linear: input ", x.shape_str(), " has ", x.size(-1),
           " features but the weight ", weight.shape_str(), " takes ", weight.size(1));
  // Any leading shape: one 2-D GEMM per direction (Note [Folded linear layers]).
  return folded_matmul("linear", x, weight, true, bias);
}

// ---- softmax family -------------------------------------------------------------------------

Tensor softmax(const Tensor& x, int64_t dim) {
  HG_AUTOCAST(
      OpId::softmax, [&](const Tensor& in) { return softmax(in, dim); }, x);  // Note [Autocast]
  Tensor y = ops::softmax(x, dim);
  if (any_requires_grad({&x})) {
    record("softmax", y, {&x}, {SavedTensor(y)}, [dim](const Tensor& g, const FunctionNode& self) -> Grads {
      return {ops::softmax_backward(g, self.saved(0), dim)};
    });
  }
  return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  HG_AUTOCAST(
      OpId::log_softmax, [&](const Tensor& in) { return log_softmax(in, dim); }, x);  // Note [Autocast]
  Tensor y = ops::log_softmax(x, dim);
  if (any_requires_grad({&x})) {
    record("log_softmax", y, {&x}, {SavedTensor(y)}, [dim](const Tensor& g, const FunctionNode& self) -> Grads {
      return {ops::log_softmax_backward(g, self.saved(0), dim)};
    });
  }
  return y;
}

Tensor softmax(const Tensor& x) { return softmax(x, -1); }
Tensor log_softmax(const Tensor& x) { return log_softmax(x, -1); }

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     int64_t classes) {
  if (targets.defined() && is_floating(targets.dtype())) {
    // Soft (probability) targets, as torch's cross_entropy with a float target
    // of the logits' shape: mean over rows of -sum_c t_c log_softmax(x)_c, with
    // t smoothed to t (1 - s) + s / C; computed in f32 (or f64) from a
    // differentiable log_softmax.
    HG_CHECK(targets.sizes() == logits.sizes() && logits.dim() == 2, "cross_entropy: probability targets must ",
             "have the logits' shape [N, C], got logits ", logits.shape_str(), " and targets ", targets.shape_str(),
             "; class-index targets are i64 [N]");
    HG_CHECK(classes == 0, "cross_entropy: `classes` (padded logits) is for class-index targets only");
    HG_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
             label_smoothing);
    const DType wide = logits.dtype() == kF64 ? kF64 : kF32;
    const Tensor lp = log_softmax(to(logits, wide), 1);
    Tensor t = to(targets, wide);
    if (label_smoothing > 0.0) t = t * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(logits.size(1));
    return neg(mean(sum(t * lp, {1})));
  }
  HG_AUTOCAST(
      OpId::cross_entropy,
      [&](const Tensor& p, const Tensor& t) { return cross_entropy(p, t, ignore_index, label_smoothing, classes); },
      logits, targets);  // Note [Autocast]
  if (!any_requires_grad({&logits})) return ops::cross_entropy(logits, targets, ignore_index, label_smoothing, classes);
  // The backward takes the forward's per-row log-sum-exp: one pass over the logits.
  ops::CrossEntropyOutput out = ops::cross_entropy_fused(logits, targets, ignore_index, label_smoothing, classes);
  record("cross_entropy", out.loss, {&logits}, {SavedTensor(logits), SavedTensor(targets), SavedTensor(out.row_stats)},
         [ignore_index, label_smoothing, classes](const Tensor& g, const FunctionNode& self) -> Grads {
           return {ops::cross_entropy_backward(g, self.saved(0), self.saved(1), ignore_index, label_smoothing, classes,
                                               self.saved(2))};
         });
  return out.loss;
}

// ---- gated linear units -------------------------------------------------------------------

namespace {
Tensor glu_op(OpId op, const Tensor& x, int64_t dim) {
  HG_AUTOCAST(
      op, [&](const Tensor& in) { return glu_op(op, in, dim); }, x);  // Note [Autocast]
  Tensor y = ops::glu_forward(op, x, dim);
  if (any_requires_grad({&x})) {
    record(op == OpId::swiglu ? "swiglu" : "glu", y, {&x}, {SavedTensor(x)},
           [op, dim](const Tensor& g, const FunctionNode& self) -> Grads {
             return {ops::glu_backward(op, g, self.saved(0), dim)};
           });
  }
  return y;
}
}  // namespace

Tensor glu(const Tensor& x, int64_t dim) { return glu_op(OpId::glu, x, dim); }
Tensor swiglu(const Tensor& x, int64_t dim) { return glu_op(OpId::swiglu, x, dim); }

}  // namespace hg
