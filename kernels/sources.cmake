# kernels/ — floor 2. Every folder has one sources.cmake that appends its files
# to the lists declared in the top-level CMakeLists.txt:
#   HG_SOURCES           : the ops layer and the CPU kernels
#   HG_CUDA_SOURCES      : .cu kernel files
#   HG_CUDA_HOST_SOURCES : host C++ that calls CUDA libraries (cuDNN graphs)
# An op family F is the folder kernels/F/: its header, its dispatch (F_ops.cpp),
# its CPU kernels (F_cpu.cpp, SIMD rows), its CUDA kernels (F.cu) and its
# sources.cmake; naming it in HG_KERNEL_FAMILIES builds it. cpu/ and cuda/ hold
# what the families share. The runtimes under them are runtime/ (runtime/sources.cmake).
set(HG_KERNEL_FAMILIES
  elementwise reduce softmax norm glu gemm conv attention index random optimizer foreach grad_norm amp_scale fp8
)
foreach(family IN LISTS HG_KERNEL_FAMILIES)
  include(${CMAKE_CURRENT_LIST_DIR}/${family}/sources.cmake)
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake)
