# kernels/fp8 — fp8 casts (per-tensor and blockwise scales), amax, dequantize, the delayed-scaling update.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/fp8_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/fp8_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/fp8.cu)
