// cuDNN's graph (backend) API as kernels/cuda/attention_cudnn.cpp calls it,
// called directly: attributes round-trip with their counts, a type mismatch or
// a finalized descriptor refuses a set, an operation missing a tensor does not
// finalize, and (cuda-emu) a graph the stand-in does not know is refused by the
// heuristics with a cuDNN status. In the emu build this checks
// runtime/emu/runtime_cudnn_graph.cpp; the attribute checks hold for the real
// library too. The stand-in's execute is checked through the attention path
// (tests/kernels/test_attention_cudnn.cpp). Tagged [cudnn].
#include <cudnn.h>

#include <cstdint>
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
