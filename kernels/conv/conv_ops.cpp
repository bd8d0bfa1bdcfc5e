// Argument checks, dtype rules, output allocation and device dispatch for
// conv2d, the 2-D poolings and batch_norm (kernels/conv/conv.h). Every error names
// the op, the shapes and the fix.
#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "core/profiler.h"
#include "kernels/conv/conv.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace hg {

int64_t pool_output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window may not start in the padding
  return out;
}

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4 || t.is_contiguous()) return false;
  const int64_t C = t.size(1), H = t.size(2), W = t.size(3);
  return t.stride(1) == 1 && (W == 1 || t.stride(3) == C) && (H == 1 || t.stride(2) == W * C) &&
         (t.size(0) == 1 || t.stride(0) == H * W * C);
}

}  // namespace hg

namespace hg::ops {

namespace {

// CPU tensors go to kernels/conv/conv_cpu.cpp; CUDA tensors to the hand-written
// kernels in kernels/conv/pool_norm.cu and the cuDNN calls in kernels/conv/conv.cu.
#define HG_CONV_CALL(op, device, fn, ...) HG_BACKEND_CALL(device, fn, __VA_ARGS__)

// The profiler's record of a convolution (Note [Profiler]): 2 FLOPs per
// multiply-add, 2 N OC OH OW (C / groups) KH KW per product (forward; d_x and d_w
// one each), the bytes of the tensors it reads and writes. On CUDA the cuDNN
// call is a library record of its own; on the CPU the backend call carries it.
struct ConvRecord {
  template <typename... Ts>
  ConvRecord(const char* name, const Tensor& y, const Tensor& w, int products, const Ts&... touched) {
    if (!profiler::active()) return;
    const double flops = 2.0 * static_cast<double>(y.numel()) * static_cast<double>(w.numel() / w.size(0)) * products;
    if (y.is_cpu()) {
      profiler::declare_call_flops(flops);
      return;
    }
    profiler::declare_work((0.0 + ... + (touched.defined() ? static_cast<double>(touched.nbytes()) : 0.0)), flops);
    index = profiler::detail::begin_work(profiler::Kind::library, name, 0, nullptr, nullptr, 0);
    profiler::declare_work(static_cast<double>(y.nbytes()));  // the bias kernel's (reads or writes y / d_y)
  }
  ~ConvRecord() {
    if (index >= 0) profiler::detail::end(index);
  }
  ConvRecord(const ConvRecord&) = delete;
  ConvRecord& operator=(const ConvRecord&) = delete;
  int index = -1;
};

void check_4d(const char* op, const Tensor& t, const char* what) {
  HG_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
  HG_CHECK(is_floating(t.dtype()), op, " needs a floating ", what, " (f32, f16, bf16, f64) but got ", t.dtype(), " ",
           t.shape_str(), "; convert with .to(hg::kF32) first");
  HG_CHECK(t.dim() == 4, op, ": ", what, " must be 4-D [N, C, H, W], got ", t.shape_str(),
           t.dim() == 3 ? "; add the batch dim with .unsqueeze(0)" : "; reshape it to [N, C, H, W]");
}

// An output [N, C, H, W] in x's layout (channels-last stays channels-last).
Tensor empty_4d(int64_t n, int64_t c, int64_t h, int64_t w, DType dtype, const Tensor& like) {
  if (is_channels_last(like))
    return empty({n, h, w, c}, {.dtype = dtype, .device = like.device()}).permute({0, 3, 1, 2});
  return empty({n, c, h, w}, {.dtype = dtype, .device = like.device()});
}

std::string pair_str(const std::array<int64_t, 2>& a) {
  std::ostringstream s;
  s << "(" << a[0] << ", " << a[1] << ")";
  return s.str();
}

std::array<int64_t, 2> conv_output(const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  std::array<int64_t, 2> out{};
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.size(2 + d), k = w.size(2 + d);
    const int64_t padded = in + p.pad_lo[d] + p.pad_hi[d], span = p.dilation[d] * (k - 1) + 1;
    HG_CHECK(span <= padded, "conv2d: the kernel ", w.shape_str(), " with dilation ", pair_str(p.dilation), " spans ",
             span, " in dim ", d + 2, " but the padded input ", x.shape_str(), " has only ", padded,
             " there; use a smaller kernel or more padding");
    out[d] = (padded - span) / p.stride[d] + 1;
  }
  return out;
}

void check_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  check_4d("conv2d", x, "input");
  check_4d("conv2d", w, "weight");
  HG_CHECK(x.device() == w.device() && (!bias.defined() || bias.device() == x.device()),
           "conv2d: input, weight and bias are on different devices; move them with .to(device)");
  HG_CHECK(x.dtype() == w.dtype() && (!bias.defined() || bias.dtype() == x.dtype()), "conv2d: input ", x.dtype(),
           ", weight ", w.dtype(), (bias.defined() ? ", bias " : ""), (bias.defined() ? dtype_name(bias.dtype()) : ""),
           " differ; convert them to one dtype (or run under hg::amp::Autocast)");
  for (int d = 0; d < 2; ++d) {
    HG_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.pad_lo[d] >= 0 && p.pad_hi[d] >= 0, "conv2d: stride ",
             pair_str(p.stride), " and dilation ", pair_str(p.dilation), " must be >= 1 and padding ",
             pair_str(p.pad_lo), " >= 0");
  }
  HG_CHECK(p.groups >= 1, "conv2d: groups must be >= 1, got ", p.groups);
  const int64_t C = x.size(1), O = w.size(0);
  HG_CHECK(C % p.groups == 0 && O % p.groups == 0, "conv2d: groups=", p.groups,
           " must divide both the input channels (", C, " of input ", x.shape_str(), ") and the output channels (", O,
           " of weight ", w.shape_str(), "); pick groups dividing both");
  HG_CHECK(w.size(1) * p.groups == C, "conv2d: weight ", w.shape_str(), " expects ", w.size(1) * p.groups,
           " input channels (weight.size(1) * groups = ", w.size(1), " * ", p.groups, ") but the input ", x.shape_str(),
           " has ", C, "; make weight [O, C/groups, KH, KW] = [", O, ", ", C / p.groups, ", ", w.size(2), ", ",
           w.size(3), "]");
  HG_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == O), "conv2d: bias ",
           bias.defined() ? bias.shape_str() : std::string(), " must be [", O, "] (one per output channel of weight ",
           w.shape_str(), ")");
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  check_conv(x, w, bias, p);
  const auto o = conv_output(x, w, p);
  Tensor y = empty_4d(x.size(0), w.size(0), o[0], o[1], x.dtype(), x);
  if (y.numel() == 0) return y;
  const ConvRecord profiled("cudnn conv2d forward", y, w, 1, x, y, w);  // Note [Profiler]
  HG_CONV_CALL("conv2d", x.device(), conv2d_forward, y, x, w, bias, p);
  return y;
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& d_y, const Tensor& x, const Tensor& w,
                                                   const Conv2dParams& p, std::array<bool, 3> need) {
  check_conv(x, w, Tensor(), p);
  const auto o = conv_output(x, w, p);
  check_4d("conv2d_backward", d_y, "d_y");
  HG_CHECK(d_y.size(0) == x.size(0) && d_y.size(1) == w.size(0) && d_y.size(2) == o[0] && d_y.size(3) == o[1],
           "conv2d_backward: d_y ", d_y.shape_str(), " is not the output shape [", x.size(0), ", ", w.size(0), ", ",
           o[0], ", ", o[1], "] of input ", x.shape_str(), " and weight ", w.shape_str());
  const Tensor g = d_y.to(x.dtype());
  Tensor d_x = need[0] ? empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x) : Tensor();
  Tensor d_w = need[1] ? empty(w.sizes(), {.dtype = w.dtype(), .device = w.device()}) : Tensor();
  Tensor d_b = need[2] ? empty({w.size(0)}, {.dtype = w.dtype(), .device = w.device()}) : Tensor();
  if (x.numel() == 0 || d_y.numel() == 0) {
    for (Tensor* t : {&d_x, &d_w, &d_b})
      if (t->defined()) t->zero_();
    return {d_x, d_w, d_b};
  }
  const ConvRecord profiled("cudnn conv2d backward", g, w, static_cast<int>(need[0]) + static_cast<int>(need[1]), g, x,
                            w, d_x, d_w);
  HG_CONV_CALL("conv2d_backward", x.device(), conv2d_backward, d_x, d_w, d_b, g, x, w, p);
  return {d_x, d_w, d_b};
}

namespace {

std::array<int64_t, 2> check_pool(const char* op, const Tensor& x, const Pool2dParams& p) {
  check_4d(op, x, "input");
  std::array<int64_t, 2> out{};
  for (int d = 0; d < 2; ++d) {
    HG_CHECK(p.kernel[d] >= 1 && p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0, op, ": kernel ",
             pair_str(p.kernel), ", stride ", pair_str(p.stride), " and dilation ", pair_str(p.dilation),
             " must be >= 1 and padding ", pair_str(p.padding), " >= 0");
    HG_CHECK(p.padding[d] <= (p.dilation[d] * (p.kernel[d] - 1) + 1) / 2, op, ": padding ", pair_str(p.padding),
             " must be at most half the (dilated) kernel ", pair_str(p.kernel), "; use a smaller padding");
    HG_CHECK(p.dilation[d] * (p.kernel[d] - 1) + 1 <= x.size(2 + d) + 2 * p.padding[d], op, ": the kernel ",
             pair_str(p.kernel), " with dilation ", pair_str(p.dilation), " is larger than the padded input ",
             x.shape_str(), " (padding ", pair_str(p.padding), "); use a smaller kernel or more padding");
    out[d] = pool_output_size(x.size(2 + d), p.kernel[d], p.stride[d], p.padding[d], p.dilation[d], p.ceil_mode);
    HG_CHECK(out[d] >= 1, op, ": the kernel ", pair_str(p.kernel), " with dilation ", pair_str(p.dilation),
             " is larger than the padded input ", x.shape_str(), " (padding ", pair_str(p.padding),
             "); use a smaller kernel or more padding");
  }
  return out;
}

void check_grad_like(const char* op, const Tensor& d_y, const Shape& want) {
  std::ostringstream w;
  w << "[";
  for (size_t i = 0; i < want.size(); ++i) w << (i ? ", " : "") << want[i];
  w << "]";
  HG_CHECK(d_y.defined() && d_y.sizes() == want, op, ": d_y ", d_y.defined() ? d_y.shape_str() : "(undefined)",
           " must have the forward output's shape ", w.str());
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d(const Tensor& x, const Pool2dParams& p) {
  const auto o = check_pool("max_pool2d", x, p);
  Tensor y = empty_4d(x.size(0), x.size(1), o[0], o[1], x.dtype(), x);
  Tensor idx = empty_4d(x.size(0), x.size(1), o[0], o[1], kI64, x);
  if (y.numel() > 0) HG_CONV_CALL("max_pool2d", x.device(), max_pool2d_forward, y, idx, x, p);
  return {y, idx};
}

Tensor max_pool2d_backward(const Tensor& d_y, const Tensor& x, const Tensor& indices, const Pool2dParams& p) {
  check_4d("max_pool2d_backward", x, "input");
  check_grad_like("max_pool2d_backward", d_y, indices.sizes());
  Tensor d_x = empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x);
  if (d_x.numel() == 0) return d_x;
  if (d_y.numel() == 0) return d_x.zero_(), d_x;
  HG_CONV_CALL("max_pool2d_backward", x.device(), max_pool2d_backward, d_x, d_y.to(x.dtype()), indices, p);
  return d_x;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  HG_CHECK(p.dilation[0] == 1 && p.dilation[1] == 1, "avg_pool2d: has no dilation (as torch); got ",
           pair_str(p.dilation));
  const auto o = check_pool("avg_pool2d", x, p);
  Tensor y = empty_4d(x.size(0), x.size(1), o[0], o[1], x.dtype(), x);
  if (y.numel() > 0) HG_CONV_CALL("avg_pool2d", x.device(), avg_pool2d_forward, y, x, p);
  return y;
}

Tensor avg_pool2d_backward(const Tensor& d_y, const Tensor& x, const Pool2dParams& p) {
  const auto o = check_pool("avg_pool2d_backward", x, p);
  check_grad_like("avg_pool2d_backward", d_y, {x.size(0), x.size(1), o[0], o[1]});
  Tensor d_x = empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x);
  if (d_x.numel() == 0) return d_x;
  HG_CONV_CALL("avg_pool2d_backward", x.device(), avg_pool2d_backward, d_x, d_y.to(x.dtype()), p);
  return d_x;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  check_4d("adaptive_avg_pool2d", x, "input");
  HG_CHECK(output_size[0] >= 1 && output_size[1] >= 1 && x.size(2) >= 1 && x.size(3) >= 1,
           "adaptive_avg_pool2d: output size ", pair_str(output_size), " must be >= 1 and the input ", x.shape_str(),
           " must have H, W >= 1");
  Tensor y = empty_4d(x.size(0), x.size(1), output_size[0], output_size[1], x.dtype(), x);
  if (y.numel() > 0) HG_CONV_CALL("adaptive_avg_pool2d", x.device(), adaptive_avg_pool2d_forward, y, x);
  return y;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& d_y, const Tensor& x) {
  check_4d("adaptive_avg_pool2d_backward", x, "input");
  check_4d("adaptive_avg_pool2d_backward", d_y, "d_y");
  HG_CHECK(d_y.size(0) == x.size(0) && d_y.size(1) == x.size(1), "adaptive_avg_pool2d_backward: d_y ", d_y.shape_str(),
           " does not match input ", x.shape_str());
  Tensor d_x = empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x);
  if (d_x.numel() == 0) return d_x;
  HG_CONV_CALL("adaptive_avg_pool2d_backward", x.device(), adaptive_avg_pool2d_backward, d_x, d_y.to(x.dtype()));
  return d_x;
}

namespace {

DType bn_acc(DType x) { return x == kF64 ? kF64 : kF32; }

// A [C] parameter or statistic as a contiguous tensor in the accumulation dtype.
Tensor bn_param(const Tensor& t, const Tensor& x, const char* what) {
  if (!t.defined()) return t;
  HG_CHECK(is_floating(t.dtype()) && t.dim() == 1 && t.size(0) == x.size(1), "batch_norm: ", what, " ", t.dtype(), " ",
           t.shape_str(), " must be a floating [C] = [", x.size(1), "] tensor (one per channel of input ",
           x.shape_str(), "); build BatchNorm2d with num_features = ", x.size(1));
  HG_CHECK(t.device() == x.device(), "batch_norm: ", what, " is on ", t.device(), " but the input on ", x.device(),
           "; move it with .to(device)");
  return t.to(bn_acc(x.dtype())).contiguous();
}

}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps) {
  check_4d("batch_norm", x, "input");
  HG_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: pass both running_mean and running_var, or neither");
  HG_CHECK(training || running_mean.defined(),
           "batch_norm: eval mode needs running_mean and running_var (or use training mode / "
           "track_running_stats=true)");
  HG_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, "batch_norm: eps must be > 0 and momentum in [0, 1], got eps ",
           eps, " momentum ", momentum);
  HG_CHECK(!training || x.numel() / std::max<int64_t>(x.size(1), 1) > 1 || x.numel() == 0,
           "batch_norm: training needs more than one value per channel, got input ", x.shape_str(),
           "; use a larger batch or eval mode");
  const DType acc = bn_acc(x.dtype());
  const Tensor w = bn_param(weight, x, "weight"), b = bn_param(bias, x, "bias");
  Tensor rm = bn_param(running_mean, x, "running_mean"), rv = bn_param(running_var, x, "running_var");
  BatchNormResult r;
  r.y = empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x);
  r.save_mean = empty({x.size(1)}, {.dtype = acc, .device = x.device()});
  r.save_rstd = empty({x.size(1)}, {.dtype = acc, .device = x.device()});
  if (x.numel() == 0) return r;
  HG_CONV_CALL("batch_norm", x.device(), batch_norm_forward, r.y, r.save_mean, r.save_rstd, x, w, b, rm, rv, training,
               momentum, eps);
  // The kernel updated its [C] copies; write back when they were copies.
  if (training && running_mean.defined()) {
    if (rm.data_ptr() != running_mean.data_ptr()) const_cast<Tensor&>(running_mean).copy_(rm);
    if (rv.data_ptr() != running_var.data_ptr()) const_cast<Tensor&>(running_var).copy_(rv);
  }
  return r;
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& weight,
                                                       const Tensor& save_mean, const Tensor& save_rstd, bool training,
                                                       std::array<bool, 3> need) {
  check_4d("batch_norm_backward", x, "input");
  check_grad_like("batch_norm_backward", d_y, x.sizes());
  const DType acc = bn_acc(x.dtype());
  const Tensor w = bn_param(weight, x, "weight");
  Tensor d_x = need[0] ? empty_4d(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x) : Tensor();
  Tensor d_w = need[1] ? empty({x.size(1)}, {.dtype = acc, .device = x.device()}) : Tensor();
  Tensor d_b = need[2] ? empty({x.size(1)}, {.dtype = acc, .device = x.device()}) : Tensor();
  if (x.numel() == 0) {
    for (Tensor* t : {&d_w, &d_b})
      if (t->defined()) t->zero_();
  } else {
    HG_CONV_CALL("batch_norm_backward", x.device(), batch_norm_backward, d_x, d_w, d_b, d_y.to(x.dtype()), x, w,
                 bn_param(save_mean, x, "save_mean"), bn_param(save_rstd, x, "save_rstd"), training);
  }
  if (weight.defined()) {
    if (d_w.defined()) d_w = d_w.to(weight.dtype());
    if (d_b.defined()) d_b = d_b.to(weight.dtype());
  }
  return {d_x, d_w, d_b};
}

}  // namespace hg::ops
