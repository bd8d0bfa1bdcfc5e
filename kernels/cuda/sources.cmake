# kernels/cuda — host C++ of the CUDA backend (emu and gpu builds). Kernel .cu
# files go in HG_CUDA_SOURCES (added by the issues that write them).
list(APPEND HG_CUDA_HOST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cuda_check.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/caching_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_hooks.cpp
)
