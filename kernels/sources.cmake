# kernels/ — floor 2. Every folder has one sources.cmake that appends its files
# to the lists declared in the top-level CMakeLists.txt:
#   HG_SOURCES           : the ops layer (here) and the CPU kernels (cpu/)
#   HG_CUDA_SOURCES      : .cu kernel files (cuda/)
# The CUDA runtime layer and the emulator are runtime/ (runtime/sources.cmake).
#
# An op family F is three files: F_ops.cpp (checks and dispatch), cpu/F.cpp
# and cuda/F.cu; naming it in HG_KERNEL_FAMILIES adds all three. Files that
# are not one family's triple are listed by hand below and in cpu/ and cuda/.
set(HG_KERNEL_FAMILIES
  reduce softmax conv gemm random optimizer foreach grad_norm norm index
  flash_attention attention fp8 glu
)
foreach(family IN LISTS HG_KERNEL_FAMILIES)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/${family}_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/cpu/${family}.cpp)
  list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda/${family}.cu)
endforeach()
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_cudnn_ops.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake)
