# kernels/glu — the gated linear units glu and swiglu.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/glu_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/glu_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/glu.cu)
