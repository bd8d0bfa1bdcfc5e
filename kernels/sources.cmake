# kernels/ — floor 2. Every folder has one sources.cmake that appends its files
# to the lists declared in the top-level CMakeLists.txt:
#   HG_SOURCES           : the ops layer (here) and the CPU kernels (cpu/)
#   HG_CUDA_SOURCES      : .cu kernel files (cuda/)
# The CUDA runtime layer and the emulator are runtime/ (runtime/sources.cmake).
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reduce_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/softmax_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gemm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/foreach_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_norm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/norm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/index_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flash_attention_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_cudnn_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp8_ops.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake)
