# kernels/cpu — the CPU kernels (every configuration).
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/index.cpp
)
