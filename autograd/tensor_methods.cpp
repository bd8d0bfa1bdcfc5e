// Tensor's libtorch-style methods and comparison operators (declared in
// core/tensor.h). Core sits on floor 0 and cannot include the ops; this file,
// on the autograd floor, defines them as one-line forwards to the
// differentiable free functions (autograd/functions.h) and, for the
// non-differentiable argmax and comparisons, to the kernel API.
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "autograd/functions.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"

namespace hg {

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return hg::sum(*this, dims, keepdim); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return hg::sum(*this, {dim}, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return hg::mean(*this, dims, keepdim); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return hg::mean(*this, {dim}, keepdim); }
Tensor Tensor::max(const std::vector<int64_t>& dims, bool keepdim) const { return hg::max(*this, dims, keepdim); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return {hg::max(*this, {dim}, keepdim), ops::argmax(*this, dim, keepdim)};
}
Tensor Tensor::min(const std::vector<int64_t>& dims, bool keepdim) const { return hg::min(*this, dims, keepdim); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  // argmin = argmax of -x: order-reversing for floats (NaN stays the extreme);
  // integers are negated in f64 (exact below 2^53 in magnitude).
  const Tensor x = detach();
  const Tensor flipped = ops::neg(is_floating(dtype()) ? x : x.to(kF64));
  return {hg::min(*this, {dim}, keepdim), ops::argmax(flipped, dim, keepdim)};
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return ops::argmax(*this, dim, keepdim); }
Tensor Tensor::relu() const { return hg::relu(*this); }
Tensor Tensor::exp() const { return hg::exp(*this); }
Tensor Tensor::log() const { return hg::log(*this); }
Tensor Tensor::sqrt() const { return hg::sqrt(*this); }
Tensor Tensor::abs() const { return hg::abs(*this); }
Tensor Tensor::neg() const { return hg::neg(*this); }
Tensor Tensor::tanh() const { return hg::tanh(*this); }
Tensor Tensor::sigmoid() const { return hg::sigmoid(*this); }
Tensor Tensor::round() const { return hg::round(*this); }
Tensor Tensor::floor() const { return hg::floor(*this); }
Tensor Tensor::trunc() const { return hg::trunc(*this); }
Tensor Tensor::pow(double exponent) const { return hg::pow(*this, exponent); }
Tensor Tensor::softmax() const { return hg::softmax(*this); }
Tensor Tensor::log_softmax() const { return hg::log_softmax(*this); }
Tensor Tensor::softmax(int64_t dim) const { return hg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return hg::log_softmax(*this, dim); }
Tensor Tensor::operator[](int64_t index) const { return select(0, index); }
Tensor Tensor::matmul(const Tensor& other) const { return hg::matmul(*this, other); }
Tensor Tensor::add(const Tensor& other) const { return hg::add(*this, other); }
Tensor Tensor::sub(const Tensor& other) const { return hg::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return hg::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return hg::div(*this, other); }

#define HG_COMPARISON(op, id)                                                                  \
  Tensor operator op(const Tensor& a, const Tensor& b) { return ops::binary(OpId::id, a, b); } \
  Tensor operator op(const Tensor& a, double b) { return ops::binary_scalar(OpId::id, a, b); }
HG_COMPARISON(==, eq)
HG_COMPARISON(!=, ne)
HG_COMPARISON(<, lt)
HG_COMPARISON(<=, le)
HG_COMPARISON(>, gt)
HG_COMPARISON(>=, ge)
#undef HG_COMPARISON

}  // namespace hg
