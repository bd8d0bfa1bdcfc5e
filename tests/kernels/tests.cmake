hg_add_test(test_kernels LABEL kernels SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_numerics.cpp
)
