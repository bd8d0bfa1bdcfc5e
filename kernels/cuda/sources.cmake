# kernels/cuda — the CUDA backend's kernels (emu and gpu configurations); the
# runtime layer under them is runtime/cuda.
# Host C++: the hooks that plug the CUDA backend into core/ (allocation, copies,
# the device-side error flag), and the cuDNN fused-attention graph.
list(APPEND HG_CUDA_HOST_SOURCES
  ${PROJECT_SOURCE_DIR}/kernels/cuda/device_hooks.cpp
  ${PROJECT_SOURCE_DIR}/runtime/cuda/device_table.cpp
  ${PROJECT_SOURCE_DIR}/kernels/attention/attention_cudnn.cpp
)
# .cu kernel files (nvcc in gpu, g++ -x c++ in emu):
list(APPEND HG_CUDA_SOURCES
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise.cu
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise_unary.cu
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise_binary.cu
  ${PROJECT_SOURCE_DIR}/kernels/softmax/cross_entropy.cu
  ${PROJECT_SOURCE_DIR}/kernels/cuda/device_error.cu
  ${PROJECT_SOURCE_DIR}/kernels/conv/pool_norm.cu
)
