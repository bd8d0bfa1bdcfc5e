// matmul: shape checks, operand layout (transposed views need no copy), bias
// pre-fill, and dispatch to the backend GEMM.
#include <atomic>

#include "core/copy.h"
#include "kernels/gemm.h"

namespace hg::ops {

namespace {

std::atomic<bool> g_allow_tf32{false};

// A matrix operand as the backend sees it: data, row stride, batch stride, and
// whether it must be read transposed. A view whose last dim is not unit-stride
// but whose second-to-last is (a transposed view) is used as-is by flipping
// the transpose flag; anything else is made contiguous first.
struct Operand {
  Tensor storage_owner;  // keeps a contiguous copy alive
  const void* data = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool trans = false;
};

Operand layout(const Tensor& t, bool trans) {
  const int64_t r = t.dim();
  const int64_t rows = t.size(r - 2), cols = t.size(r - 1);
  const int64_t s_row = t.stride(r - 2), s_col = t.stride(r - 1);
  Operand op;
  op.storage_owner = t;
  op.trans = trans;
  // Size-1 dims may have any stride; BLAS needs ld >= the stored row length.
  const bool row_major = (cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols);
  const bool col_major = (rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows);
  if (row_major) {
    op.ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_row;
  } else if (col_major) {
    op.ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_col;  // stored transposed
    op.trans = !trans;
  } else {
    op.storage_owner = t.contiguous();
    op.ld = std::max<int64_t>(cols, 1);
  }
  op.data = op.storage_owner.data_ptr();
  if (r == 3) {
    op.batch_stride = t.size(0) == 1 ? 0 : op.storage_owner.stride(0);
  }
  return op;
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, const Tensor& bias) {
  HG_CHECK(a.defined() && b.defined(), "matmul: both operands must be defined tensors");
  HG_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3), "matmul: operands must be 2-D or 3-D (batched), got ",
           a.shape_str(), " and ", b.shape_str(), "; use unsqueeze()/reshape() for vectors");
  HG_CHECK(a.device() == b.device(), "matmul: operands are on different devices (", a.device(),
           " and ", b.device(), "); move one with .to(device)");
  HG_CHECK(a.dtype() == b.dtype(), "matmul: operand dtypes differ (", a.dtype(), " and ",
           b.dtype(), "); convert one with .to(dtype) (autocast does this for you)");
  HG_CHECK(is_floating(a.dtype()), "matmul: needs floating operands (f32, f16, bf16, f64), got ",
           a.dtype());
  const int64_t m = trans_a ? a.size(-1) : a.size(-2);
  const int64_t ka = trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  HG_CHECK(ka == kb, "shape mismatch in matmul: ", a.shape_str(), trans_a ? "^T" : "", " @ ",
           b.shape_str(), trans_b ? "^T" : "", ": inner dims ", ka, " != ", kb);
  int64_t batch = 1;
  if (a.dim() == 3) batch = a.size(0);
  if (b.dim() == 3) {
    HG_CHECK(a.dim() == 2 || b.size(0) == batch || b.size(0) == 1 || batch == 1,
             "matmul: batch sizes differ: ", a.shape_str(), " @ ", b.shape_str());
    batch = std::max(batch, b.size(0));
  }
  const bool batched = a.dim() == 3 || b.dim() == 3;
  Shape out_shape = batched ? Shape{batch, m, n} : Shape{m, n};
  Tensor out = empty(out_shape, {.dtype = a.dtype(), .device = a.device()});
  float beta = 0.0f;
  if (bias.defined()) {
    HG_CHECK(bias.device() == a.device(), "matmul: bias is on ", bias.device(), " but operands are on ",
             a.device());
    // The bias is written into out and the GEMM accumulates onto it (beta = 1):
    // one rounding, bias added in fp32.
    copy_into(out, bias.expand(out_shape));
    beta = 1.0f;
  }
  if (out.numel() == 0) return out;
  if (ka == 0) {  // empty inner dim: the product is zero (plus bias)
    if (!bias.defined()) out.zero_();
    return out;
  }
  const Operand A = layout(a, trans_a);
  const Operand B = layout(b, trans_b);
  GemmArgs args;
  args.dtype = a.dtype();
  args.trans_a = A.trans;
  args.trans_b = B.trans;
  args.m = m;
  args.n = n;
  args.k = ka;
  args.batch = batch;
  args.a = A.data;
  args.lda = A.ld;
  args.stride_a = a.dim() == 3 ? A.batch_stride : 0;
  args.b = B.data;
  args.ldb = B.ld;
  args.stride_b = b.dim() == 3 ? B.batch_stride : 0;
  args.c = out.data_ptr();
  args.ldc = n;
  args.stride_c = m * n;
  args.beta = beta;
  args.allow_tf32 = allow_tf32();
  args.device_index = a.device().index;
#if defined(HG_WITH_CUDA)
  if (a.is_cuda()) {
    cuda::gemm(args);
    return out;
  }
#endif
  cpu::gemm(args);
  return out;
}

}  // namespace hg::ops
