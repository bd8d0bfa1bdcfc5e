# kernels/cuda — the CUDA backend's kernels (emu and gpu configurations); the
# runtime layer under them is runtime/cuda.
# Host C++: the hooks that plug the CUDA backend into core/ (allocation, copies,
# the device-side error flag), and the cuDNN fused-attention graph.
list(APPEND HG_CUDA_HOST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device_hooks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_table.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_cudnn.cpp
)
# .cu kernel files (nvcc in gpu, g++ -x c++ in emu):
list(APPEND HG_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_unary.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_binary.cu
  ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cu
  ${CMAKE_CURRENT_LIST_DIR}/device_error.cu
  ${CMAKE_CURRENT_LIST_DIR}/pool_norm.cu
)
