// cuDNN's graph (backend) API as kernels/attention/attention_cudnn.cpp calls it,
// called directly: attributes round-trip with their counts, a type mismatch or
// a finalized descriptor refuses a set, an operation missing a tensor does not
// finalize, and (cuda-emu) a graph the stand-in does not know is refused by the
// heuristics with a cuDNN status, and the stand-in accepts the attention
// backward graph as kernels/attention/attention_cudnn.cpp builds it but refuses it
// with any node, operand, uid or stride wrong. In the emu build this checks
// runtime/emu/runtime_cudnn_graph.cpp; the attribute checks hold for the real
// library too. The stand-in's execute is checked through the attention path
// (tests/kernels/test_attention_cudnn.cpp). Tagged [cudnn].
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace {

cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  REQUIRE(cudnnBackendCreateDescriptor(type, &d) == CUDNN_STATUS_SUCCESS);
  return d;
}

cudnnBackendDescriptor_t tensor(int64_t uid, std::vector<int64_t> dims, bool is_virtual,
                                cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t n = static_cast<int64_t>(dims.size()), align = 16;
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims.data()) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides.data()) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendFinalize(t) == CUDNN_STATUS_SUCCESS);
  return t;
}

}  // namespace

TEST_CASE("cuDNN graph API: tensor attributes round-trip; bad sets are refused", "[cuda][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  cudnnBackendDescriptor_t t = tensor(42, {2, 3, 5, 64}, false, CUDNN_DATA_HALF);
  int64_t count = 0;
  std::vector<int64_t> dims(8, -1);
  REQUIRE(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8, &count, dims.data()) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == 4);
  CHECK(std::vector<int64_t>(dims.begin(), dims.begin() + 4) == std::vector<int64_t>{2, 3, 5, 64});
  std::vector<int64_t> strides(2, -1);  // fewer than stored: count says 4, two copied
  REQUIRE(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 2, &count, strides.data()) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == 4);
  CHECK(strides == std::vector<int64_t>{3 * 5 * 64, 5 * 64});
  int64_t uid = 0;
  REQUIRE(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &count, &uid) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(uid == 42);
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  REQUIRE(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &count, &type) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(type == CUDNN_DATA_HALF);
  // the wrong element type, and a set after finalize
  CHECK(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_FLOAT, 1, &count, &uid) !=
        CUDNN_STATUS_SUCCESS);
  const int64_t other = 7;
  CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &other) != CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendDestroyDescriptor(t) == CUDNN_STATUS_SUCCESS);

  // a tensor without strides does not finalize
  cudnnBackendDescriptor_t bare = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const int64_t d4[] = {1, 1, 4, 4};
  REQUIRE(cudnnBackendSetAttribute(bare, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(bare, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d4) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(bare, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &other) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendFinalize(bare) != CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendDestroyDescriptor(bare) == CUDNN_STATUS_SUCCESS);
}

TEST_CASE("cuDNN graph API: operations need their tensors; descriptor attributes round-trip", "[cuda][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  cudnnBackendDescriptor_t x = tensor(1, {1, 1, 4, 4}, false), y = tensor(2, {1, 1, 4, 4}, false);
  cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_EXP;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  REQUIRE(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendFinalize(pw) == CUDNN_STATUS_SUCCESS);
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  REQUIRE(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &pw) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendFinalize(op) != CUDNN_STATUS_SUCCESS);  // no y yet
  cudnnBackendDescriptor_t op2 = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  REQUIRE(cudnnBackendSetAttribute(op2, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &pw) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(op2, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(op2, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendFinalize(op2) == CUDNN_STATUS_SUCCESS);
  // the stored y comes back into a descriptor of the caller's
  cudnnBackendDescriptor_t got = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t count = 0;
  REQUIRE(cudnnBackendGetAttribute(op2, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                   &got) == CUDNN_STATUS_SUCCESS);
  CHECK(count == 1);
  int64_t uid = 0;
  REQUIRE(cudnnBackendGetAttribute(got, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &count, &uid) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(uid == 2);

#if defined(HG_CUDA_EMU)
  // y = exp(x) alone is no attention graph: the stand-in's heuristics refuse it.
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  REQUIRE(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op2) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendFinalize(graph) == CUDNN_STATUS_SUCCESS);
  cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
  REQUIRE(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &graph) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendFinalize(heur) == CUDNN_STATUS_NOT_SUPPORTED);
  // a plan from an unfinalized engine config is refused too
  cudnnBackendDescriptor_t cfg = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  REQUIRE(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &cfg) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS);
  // destroying what was never created (or twice) is a bad parameter
  CHECK(cudnnBackendDestroyDescriptor(plan) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBackendDestroyDescriptor(plan) == CUDNN_STATUS_BAD_PARAM);
  for (cudnnBackendDescriptor_t d : {cfg, heur, graph}) CHECK(cudnnBackendDestroyDescriptor(d) == CUDNN_STATUS_SUCCESS);
#endif
  for (cudnnBackendDescriptor_t d : {got, op2, op, pw, x, y})
    CHECK(cudnnBackendDestroyDescriptor(d) == CUDNN_STATUS_SUCCESS);
}

#if defined(HG_CUDA_EMU)
namespace {

// A graph under construction through the raw API; destroys what it created.
class RawGraph {
 public:
  RawGraph() = default;
  RawGraph(const RawGraph&) = delete;
  RawGraph& operator=(const RawGraph&) = delete;
  ~RawGraph() {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) (void)cudnnBackendDestroyDescriptor(*it);
  }

  cudnnBackendDescriptor_t t(int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides, cudnnDataType_t type,
                             bool is_virtual, bool by_value = false) {
    cudnnBackendDescriptor_t d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t n = static_cast<int64_t>(dims.size()), align = 16;
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims.data()) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides.data()) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual) ==
            CUDNN_STATUS_SUCCESS);
    if (by_value)
      REQUIRE(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value) ==
              CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS);
    return d;
  }
  // a virtual f32 (or `type`) tensor, packed
  cudnnBackendDescriptor_t v(std::vector<int64_t> dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
    return t(next_++, std::move(dims), std::move(strides), type, true);
  }

  void pw(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
          cudnnBackendDescriptor_t tt, cudnnBackendDescriptor_t y, int64_t axis = -1) {
    cudnnBackendDescriptor_t desc = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    REQUIRE(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32) ==
            CUDNN_STATUS_SUCCESS);
    if (axis >= 0)
      REQUIRE(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis) ==
              CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendFinalize(desc) == CUDNN_STATUS_SUCCESS);
    op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tt},
                                                      {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}});
  }
  void mm(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t desc = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    REQUIRE(cudnnBackendSetAttribute(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendFinalize(desc) == CUDNN_STATUS_SUCCESS);
    op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
                                                   {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
                                                   {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
                                                   {CUDNN_ATTR_OPERATION_MATMUL_DESC, desc}});
  }
  void sum(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t desc = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    REQUIRE(cudnnBackendSetAttribute(desc, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
                                     &add) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendFinalize(desc) == CUDNN_STATUS_SUCCESS);
    op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
                                                      {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
                                                      {CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc}});
  }
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x}, {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}});
  }

  // Finalizes the graph and heuristics: SUCCESS when the stand-in has an engine for it.
  cudnnStatus_t heuristics() {
    cudnnBackendDescriptor_t graph = keep(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    REQUIRE(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     static_cast<int64_t>(ops_.size()), ops_.data()) == CUDNN_STATUS_SUCCESS);
    if (const cudnnStatus_t s = cudnnBackendFinalize(graph); s != CUDNN_STATUS_SUCCESS) return s;
    cudnnBackendDescriptor_t heur = keep(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    REQUIRE(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &graph) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ==
            CUDNN_STATUS_SUCCESS);
    return cudnnBackendFinalize(heur);
  }

 private:
  cudnnBackendDescriptor_t keep(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    REQUIRE(cudnnBackendCreateDescriptor(type, &d) == CUDNN_STATUS_SUCCESS);
    all_.push_back(d);
    return d;
  }
  void op(cudnnBackendDescriptorType_t type,
          std::vector<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> slots) {
    cudnnBackendDescriptor_t o = keep(type);
    for (auto& [name, d] : slots) {
      if (d != nullptr)
        REQUIRE(cudnnBackendSetAttribute(o, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) == CUDNN_STATUS_SUCCESS);
    }
    REQUIRE(cudnnBackendFinalize(o) == CUDNN_STATUS_SUCCESS);
    ops_.push_back(o);
  }
  std::vector<cudnnBackendDescriptor_t> all_, ops_;
  int64_t next_ = 100;
};

// One way to get the backward graph wrong (kNone: as kernels/attention/attention_cudnn.cpp builds it).
enum class Wrong {
  kNone,
  kAccumulate,            // not wrong: the dQ-accumulating variant
  kReshapeNotTransposed,  // P^T with P's strides (a reshape that is no transpose)
  kNoRowSumScale,         // dP - D with D straight from the reduction (no "* one" into a real tensor)
  kDkFromDo,              // dK = dS^T dO instead of dS^T Q (the shapes agree; the operand is wrong)
  kExtraOp,               // one node outside the pattern
  kDvRows,                // dV [B,H,L,D]: a matmul whose operands disagree
  kStatsVirtual,          // Stats a virtual tensor
  kDqFromKT,              // dQ = dS K^T (no reshape back to K)
};

cudnnStatus_t backward_graph(Wrong w) {
  const int64_t b = 1, h = 2, l = 5, s = 7, d = 64;
  const cudnnDataType_t f16 = CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT;
  RawGraph g;
  const auto packed = [](std::vector<int64_t> dims) {
    std::vector<int64_t> st(4, 1);
    for (size_t i = 3; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
    return st;
  };
  const std::vector<int64_t> one4{1, 1, 1, 1};
  cudnnBackendDescriptor_t q = g.t(1, {b, h, l, d}, packed({b, h, l, d}), f16, false);
  const std::vector<int64_t> kst = packed({b, h, s, d});
  cudnnBackendDescriptor_t kt = g.t(2, {b, h, d, s}, {kst[0], kst[1], kst[3], kst[2]}, f16, false);
  cudnnBackendDescriptor_t vt = g.t(3, {b, h, d, s}, {kst[0], kst[1], kst[3], kst[2]}, f16, false);
  cudnnBackendDescriptor_t o = g.t(4, {b, h, l, d}, packed({b, h, l, d}), f16, false);
  cudnnBackendDescriptor_t stats = g.t(5, {b, h, l, 1}, {h * l, l, 1, 1}, f32, w == Wrong::kStatsVirtual);
  cudnnBackendDescriptor_t scale = g.t(6, one4, one4, f32, false, true);
  cudnnBackendDescriptor_t fill = g.t(7, one4, one4, f32, false, true);
  cudnnBackendDescriptor_t d_o = g.t(8, {b, h, l, d}, packed({b, h, l, d}), f16, false);
  cudnnBackendDescriptor_t dq = g.t(9, {b, h, l, d}, packed({b, h, l, d}), f16, false);
  cudnnBackendDescriptor_t dk = g.t(10, {b, h, s, d}, kst, f16, false);
  const int64_t dv_rows = w == Wrong::kDvRows ? l : s;
  cudnnBackendDescriptor_t dv = g.t(11, {b, h, dv_rows, d}, packed({b, h, dv_rows, d}), f16, false);
  cudnnBackendDescriptor_t one = g.t(13, one4, one4, f32, false, true);

  cudnnBackendDescriptor_t do_o = g.v({b, h, l, d}), rows = g.v({b, h, l, 1});
  g.pw(CUDNN_POINTWISE_MUL, d_o, o, nullptr, do_o);
  g.sum(do_o, rows);
  cudnnBackendDescriptor_t row_sum = rows;
  if (w != Wrong::kNoRowSumScale) {
    row_sum = g.t(12, {b, h, l, 1}, {h * l, l, 1, 1}, f32, false);
    g.pw(CUDNN_POINTWISE_MUL, rows, one, nullptr, row_sum);
  }
  const std::vector<int64_t> ls{b, h, l, s};
  cudnnBackendDescriptor_t s0 = g.v(ls), s1 = g.v(ls);
  g.mm(q, kt, s0);
  g.pw(CUDNN_POINTWISE_MUL, s0, scale, nullptr, s1);
  cudnnBackendDescriptor_t row = g.v(ls, CUDNN_DATA_INT32), col = g.v(ls, CUDNN_DATA_INT32);
  cudnnBackendDescriptor_t keep = g.v(ls, CUDNN_DATA_BOOLEAN), masked = g.v(ls);
  g.pw(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, nullptr, row, 2);
  g.pw(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, nullptr, col, 3);
  g.pw(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep);
  g.pw(CUDNN_POINTWISE_BINARY_SELECT, s1, fill, keep, masked);
  cudnnBackendDescriptor_t centred = g.v(ls), p = g.v(ls);
  g.pw(CUDNN_POINTWISE_SUB, masked, stats, nullptr, centred);
  g.pw(CUDNN_POINTWISE_EXP, centred, nullptr, nullptr, p);
  if (w == Wrong::kExtraOp) g.pw(CUDNN_POINTWISE_EXP, p, nullptr, nullptr, g.v(ls));
  const std::vector<int64_t> tdims{b, h, s, l}, tst{h * l * s, l * s, 1, s};
  cudnnBackendDescriptor_t pt =
      w == Wrong::kReshapeNotTransposed ? g.t(200, tdims, packed(tdims), f16, true) : g.t(200, tdims, tst, f16, true);
  g.reshape(p, pt);
  g.mm(pt, d_o, dv);
  cudnnBackendDescriptor_t dp = g.v(ls), dpc = g.v(ls), dsu = g.v(ls), ds = g.v(ls);
  g.mm(d_o, vt, dp);
  g.pw(CUDNN_POINTWISE_SUB, dp, row_sum, nullptr, dpc);
  g.pw(CUDNN_POINTWISE_MUL, dpc, p, nullptr, dsu);
  g.pw(CUDNN_POINTWISE_MUL, dsu, scale, nullptr, ds);
  cudnnBackendDescriptor_t dst = g.t(201, tdims, tst, f16, true);
  g.reshape(ds, dst);
  cudnnBackendDescriptor_t k = g.t(202, {b, h, s, d}, kst, f16, true);
  g.reshape(kt, k);
  g.mm(dst, w == Wrong::kDkFromDo ? d_o : q, dk);
  cudnnBackendDescriptor_t k_for_dq = w == Wrong::kDqFromKT ? kt : k;
  if (w == Wrong::kAccumulate) {
    cudnnBackendDescriptor_t acc = g.t(14, {b, h, l, d}, packed({b, h, l, d}), f32, false);
    g.mm(ds, k_for_dq, acc);
    g.pw(CUDNN_POINTWISE_IDENTITY, acc, nullptr, nullptr, dq);
  } else {
    g.mm(ds, k_for_dq, dq);
  }
  return g.heuristics();
}

}  // namespace

TEST_CASE("cuDNN graph API (cuda-emu): the attention backward graph is recognised only when built right",
          "[cuda][cudnn]") {
  HG_REQUIRE_CUDA_DEVICE();
  CHECK(backward_graph(Wrong::kNone) == CUDNN_STATUS_SUCCESS);
  CHECK(backward_graph(Wrong::kAccumulate) == CUDNN_STATUS_SUCCESS);
  for (const Wrong w : {Wrong::kReshapeNotTransposed, Wrong::kNoRowSumScale, Wrong::kDkFromDo, Wrong::kExtraOp,
                        Wrong::kDvRows, Wrong::kStatsVirtual, Wrong::kDqFromKT}) {
    INFO("wrong graph " << static_cast<int>(w));
    CHECK(backward_graph(w) != CUDNN_STATUS_SUCCESS);
  }
}
#endif
