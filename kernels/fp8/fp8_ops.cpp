// The fp8 ops: check every argument, allocate outputs, one backend call
// (Note [fp8 scaled casts], Note [fp8 GEMM] in kernels/fp8/fp8.h).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/dispatch.h"
#include "kernels/fp8/fp8.h"

namespace hg {

float fp8_max(DType fp8) {
  HG_CHECK(is_fp8(fp8), "fp8_max: ", fp8, " is not an fp8 dtype (f8e4m3 or f8e5m2)");
  return fp8 == kF8E4M3 ? float8_e4m3::kMax : float8_e5m2::kMax;
}

namespace ops {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape_str() + " on " + t.device().str()
                     : std::string("an undefined tensor");
}

void check_scalar(const char* op, const Tensor& t, Device device, const char* what) {
  HG_CHECK(t.defined() && t.dtype() == kF32 && t.numel() == 1 && t.device() == device && t.is_contiguous(), op, ": ",
           what, " must be a contiguous f32 tensor of 1 element on ", device, ", got ", describe(t));
}

void check_source(const char* op, const Tensor& x) {
  HG_CHECK(x.defined(), op, ": the input is undefined");
  HG_CHECK(x.dtype() == kF32 || x.dtype() == kF16 || x.dtype() == kBF16, op,
           ": casts f32, f16 or bf16 tensors to fp8, got ", describe(x));
}

void check_fp8(const char* op, DType t, const char* what) {
  HG_CHECK(is_fp8(t), op, ": ", what, " must be f8e4m3 or f8e5m2, got ", t);
}

Fp8BlockArgs block_geometry(const char* op, const Shape& sizes, Fp8Block block) {
  HG_CHECK(sizes.size() == 2, op, ": blockwise scaling takes a 2-D [M, K] tensor, got rank ", sizes.size());
  Fp8BlockArgs g;
  g.rows = sizes[0];
  g.cols = sizes[1];
  g.block_rows = block == Fp8Block::row_1x128 ? 1 : 128;
  g.grid_rows = (g.rows + g.block_rows - 1) / g.block_rows;
  g.grid_cols = (g.cols + kFp8BlockCols - 1) / kFp8BlockCols;
  return g;
}

void check_out_dtype(const char* op, DType out) {
  HG_CHECK(out == kF32 || out == kF16 || out == kBF16, op, ": the output dtype must be f32, f16 or bf16, got ", out);
}

}  // namespace

Tensor fp8_cast(const Tensor& x, DType fp8, const Tensor& scale, const Tensor& amax, const Tensor& saturated) {
  check_source("fp8_cast", x);
  check_fp8("fp8_cast", fp8, "the target dtype");
  check_scalar("fp8_cast", scale, x.device(), "scale");
  check_scalar("fp8_cast", amax, x.device(), "amax");
  if (saturated.defined()) {
    HG_CHECK(saturated.dtype() == kI64 && saturated.numel() == 1 && saturated.device() == x.device() &&
                 saturated.is_contiguous(),
             "fp8_cast: the saturation counter must be a contiguous i64 tensor of 1 element on ", x.device(), ", got ",
             describe(saturated));
  }
  const Tensor src = x.contiguous();
  Tensor q = empty(x.sizes(), {.dtype = fp8, .device = x.device()});
  HG_BACKEND_CALL(x.device(), fp8_cast, q, src, scale, amax, saturated);
  amax.bump_version();
  if (saturated.defined()) saturated.bump_version();
  return q;
}

Tensor fp8_transpose_padded(const Tensor& q, int64_t pad) {
  HG_CHECK(q.defined() && q.dim() == 2, "fp8_transpose_padded: takes a 2-D [M, K] tensor, got ", describe(q));
  check_fp8("fp8_transpose_padded", q.dtype(), "q");
  HG_CHECK(pad >= 1, "fp8_transpose_padded: pad must be >= 1, got ", pad);
  const int64_t m = q.size(0), k = q.size(1), mp = (m + pad - 1) / pad * pad;
  Tensor qt = empty({k, mp}, {.dtype = q.dtype(), .device = q.device()});
  if (mp != m) qt.zero_();  // fp8 zero is the all-zero byte
  if (m > 0 && k > 0) qt.narrow(1, 0, m).copy_(q.detach().transpose(0, 1));
  return qt;
}

void fp8_amax(const Tensor& x, const Tensor& amax) {
  check_source("fp8_amax", x);
  check_scalar("fp8_amax", amax, x.device(), "amax");
  HG_BACKEND_CALL(x.device(), fp8_amax, x.contiguous(), amax);
  amax.bump_version();
}

std::pair<Tensor, Tensor> fp8_cast_blockwise(const Tensor& x, DType fp8, Fp8Block block) {
  check_source("fp8_cast_blockwise", x);
  check_fp8("fp8_cast_blockwise", fp8, "the target dtype");
  const Fp8BlockArgs g = block_geometry("fp8_cast_blockwise", x.sizes(), block);
  Tensor q = empty(x.sizes(), {.dtype = fp8, .device = x.device()});
  Tensor scale_inv = empty({g.grid_rows, g.grid_cols}, {.dtype = kF32, .device = x.device()});
  if (x.numel() > 0) HG_BACKEND_CALL(x.device(), fp8_cast_blockwise, q, scale_inv, x.contiguous(), g);
  return {q, scale_inv};
}

Tensor fp8_dequantize(const Tensor& q, const Tensor& scale_inv, DType out_dtype) {
  HG_CHECK(q.defined(), "fp8_dequantize: q is undefined");
  check_fp8("fp8_dequantize", q.dtype(), "q");
  check_out_dtype("fp8_dequantize", out_dtype);
  check_scalar("fp8_dequantize", scale_inv, q.device(), "scale_inv");
  Tensor out = empty(q.sizes(), {.dtype = out_dtype, .device = q.device()});
  HG_BACKEND_CALL(q.device(), fp8_dequantize, out, q.contiguous(), scale_inv, nullptr);
  return out;
}

Tensor fp8_dequantize_blockwise(const Tensor& q, const Tensor& scale_inv, Fp8Block block, DType out_dtype) {
  HG_CHECK(q.defined(), "fp8_dequantize_blockwise: q is undefined");
  check_fp8("fp8_dequantize_blockwise", q.dtype(), "q");
  check_out_dtype("fp8_dequantize_blockwise", out_dtype);
  const Fp8BlockArgs g = block_geometry("fp8_dequantize_blockwise", q.sizes(), block);
  HG_CHECK(scale_inv.defined() && scale_inv.dtype() == kF32 && scale_inv.device() == q.device() &&
               scale_inv.sizes() == Shape({g.grid_rows, g.grid_cols}),
           "fp8_dequantize_blockwise: scale_inv must be f32 [", g.grid_rows, ", ", g.grid_cols, "] on ", q.device(),
           " for q ", q.shape_str(), ", got ", describe(scale_inv));
  Tensor out = empty(q.sizes(), {.dtype = out_dtype, .device = q.device()});
  if (q.numel() > 0) HG_BACKEND_CALL(q.device(), fp8_dequantize, out, q.contiguous(), scale_inv.contiguous(), &g);
  return out;
}

void fp8_update_scales_(const Tensor& history, const Tensor& scale, const Tensor& scale_inv, const Tensor& fp8_max,
                        const Tensor& found_inf, int margin, Fp8AmaxCompute compute) {
  constexpr const char* op = "fp8_update_scales_";
  HG_CHECK(history.defined() && history.dim() == 2 && history.dtype() == kF32 && history.is_contiguous() &&
               history.size(0) >= 1,
           op, ": the amax history must be a contiguous f32 [L >= 1, n] tensor, got ", describe(history));
  const Device device = history.device();
  const int64_t n = history.size(1);
  auto check_vector = [&](const Tensor& t, const char* what) {
    HG_CHECK(t.defined() && t.dtype() == kF32 && t.is_contiguous() && t.numel() == n && t.device() == device, op, ": ",
             what, " must be a contiguous f32 tensor of ", n, " elements on ", device, ", got ", describe(t));
  };
  check_vector(scale, "scale");
  check_vector(scale_inv, "scale_inv");
  check_vector(fp8_max, "fp8_max");
  if (found_inf.defined()) check_scalar(op, found_inf, device, "found_inf");
  HG_CHECK(margin >= 0 && margin < 64, op, ": margin must be in [0, 64), got ", margin);
  if (n == 0) return;
  Fp8UpdateArgs args{static_cast<float*>(history.data_ptr()),
                     static_cast<float*>(scale.data_ptr()),
                     static_cast<float*>(scale_inv.data_ptr()),
                     static_cast<const float*>(fp8_max.data_ptr()),
                     found_inf.defined() ? static_cast<const float*>(found_inf.data_ptr()) : nullptr,
                     history.size(0),
                     n,
                     std::ldexp(1.0f, margin),
                     compute};
#if defined(HG_WITH_CUDA)
  if (device.is_cuda()) {
    cuda::fp8_update_scales_(args, device);
  } else {
    cpu::fp8_update_scales_(args);
  }
#else
  cpu::fp8_update_scales_(args);
#endif
  for (const Tensor* t : {&history, &scale, &scale_inv}) t->bump_version();
}

Tensor fp8_linear(const Tensor& a, const Tensor& b, const Tensor& a_scale_inv, const Tensor& b_scale_inv,
                  DType out_dtype, const Tensor& bias) {
  constexpr const char* op = "fp8_linear";
  HG_CHECK(a.defined() && b.defined(), op, ": a and b must be defined");
  check_fp8(op, a.dtype(), "a");
  check_fp8(op, b.dtype(), "b");
  HG_CHECK(!(a.dtype() == kF8E5M2 && b.dtype() == kF8E5M2), op,
           ": E5M2 x E5M2 has no fp8 GEMM (cuBLASLt pairs E5M2 only with E4M3); use E4M3 for one operand");
  check_out_dtype(op, out_dtype);
  HG_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1), op, ": computes a [M, K] @ b[N, K]^T, got a ",
           a.shape_str(), " and b ", b.shape_str());
  HG_CHECK(a.device() == b.device(), op, ": a is on ", a.device(), " and b on ", b.device());
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  HG_CHECK(k % 16 == 0 && n % 16 == 0, op, ": K (", k, ") and N (", n,
           ") must be multiples of 16 (cuBLASLt's fp8 GEMM needs 16-byte leading dimensions); pad the layer or keep "
           "it in bf16");
  check_scalar(op, a_scale_inv, a.device(), "a_scale_inv");
  check_scalar(op, b_scale_inv, a.device(), "b_scale_inv");
  Tensor bias_c;
  if (bias.defined()) {
    const DType want = out_dtype == kF16 ? kF16 : kBF16;
    HG_CHECK(bias.dim() == 1 && bias.size(0) == n && bias.device() == a.device() && bias.dtype() == want, op,
             ": the bias must be ", want, " [", n, "] on ", a.device(), " for a ", out_dtype,
             " output (cuBLASLt's fp8 bias types), got ", describe(bias));
    bias_c = bias.detach().contiguous();
  }
  if (k == 0) {  // an empty sum (cuBLASLt refuses zero leading dimensions): the bias or zeros
    Tensor out = zeros({m, n}, {.dtype = out_dtype, .device = a.device()});
    if (bias_c.defined() && m > 0) out.copy_(bias_c.view({1, n}).expand({m, n}));
    return out;
  }
  Tensor out = empty({m, n}, {.dtype = out_dtype, .device = a.device()});
  if (m == 0) return out;
  HG_BACKEND_CALL(a.device(), fp8_linear, out, a.contiguous(), b.contiguous(), a_scale_inv, b_scale_inv, bias_c);
  return out;
}

}  // namespace ops
}  // namespace hg
