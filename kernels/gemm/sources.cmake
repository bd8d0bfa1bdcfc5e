# kernels/gemm — matmul, linear and their backwards (OpenBLAS, oneDNN, cuBLASLt).
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/gemm_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm.cu)
# The native bf16 GEMM through oneDNN, when the build has it (CMakeLists.txt, HG_WITH_ONEDNN).
if(HG_WITH_ONEDNN)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm_onednn.cpp)
endif()
