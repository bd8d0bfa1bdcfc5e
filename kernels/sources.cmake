# kernels/ — floor 1. Every folder has one sources.cmake that appends its files
# to the lists declared in the top-level CMakeLists.txt:
#   HG_SOURCES           : the ops layer (here) and the CPU kernels (cpu/)
#   HG_CUDA_HOST_SOURCES : host C++ of the CUDA backend (cuda/: runtime layer, allocator)
#   HG_CUDA_SOURCES      : .cu kernel files (cuda/)
#   HG_EMU_SOURCES       : the CUDA-on-CPU emulator (emu/; emu configuration only)
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reduce_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/softmax_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gemm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_norm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/norm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/index_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flash_attention_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_ops.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/emu/sources.cmake)
