# kernels/cuda — .cu kernel files (nvcc in gpu, g++ -x c++ in emu).
list(APPEND HG_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cu
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cu
  ${CMAKE_CURRENT_LIST_DIR}/device_error.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/random.cu
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cu
  ${CMAKE_CURRENT_LIST_DIR}/grad_norm.cu
)
