# kernels/grad_norm — the global gradient norm and clipping.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/grad_norm_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/grad_norm_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/grad_norm.cu)
