# kernels/ — floor 2. Every folder has one sources.cmake that appends its files
# to the lists declared in the top-level CMakeLists.txt:
#   HG_SOURCES           : the ops layer (here) and the CPU kernels (cpu/)
#   HG_CUDA_SOURCES      : .cu kernel files (cuda/)
# The CUDA runtime layer and the emulator are runtime/ (runtime/sources.cmake).
# Files are named by their path from the repository root.
list(APPEND HG_SOURCES
  ${PROJECT_SOURCE_DIR}/kernels/reduce/reduce_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/reduce/reduce_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/softmax/softmax_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/softmax/softmax_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/conv/conv_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/conv/conv_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/gemm/gemm_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/gemm/gemm_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/random/random_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/random/random_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/foreach/foreach_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/foreach/foreach_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/grad_norm/grad_norm_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/grad_norm/grad_norm_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/norm/norm_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/norm/norm_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/index/index_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/index/index_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/attention/attention_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/attention/attention_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/fp8/fp8_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/fp8/fp8_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/glu/glu_ops.cpp ${PROJECT_SOURCE_DIR}/kernels/glu/glu_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise_ops.cpp
  ${PROJECT_SOURCE_DIR}/kernels/attention/attention_cudnn_ops.cpp
)
list(APPEND HG_CUDA_SOURCES
  ${PROJECT_SOURCE_DIR}/kernels/reduce/reduce.cu
  ${PROJECT_SOURCE_DIR}/kernels/softmax/softmax.cu
  ${PROJECT_SOURCE_DIR}/kernels/conv/conv.cu
  ${PROJECT_SOURCE_DIR}/kernels/gemm/gemm.cu
  ${PROJECT_SOURCE_DIR}/kernels/random/random.cu
  ${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer.cu
  ${PROJECT_SOURCE_DIR}/kernels/foreach/foreach.cu
  ${PROJECT_SOURCE_DIR}/kernels/grad_norm/grad_norm.cu
  ${PROJECT_SOURCE_DIR}/kernels/norm/norm.cu
  ${PROJECT_SOURCE_DIR}/kernels/index/index.cu
  ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention.cu
  ${PROJECT_SOURCE_DIR}/kernels/attention/attention.cu
  ${PROJECT_SOURCE_DIR}/kernels/fp8/fp8.cu
  ${PROJECT_SOURCE_DIR}/kernels/glu/glu.cu
)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake)
