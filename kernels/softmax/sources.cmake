# kernels/softmax — softmax, log_softmax and cross-entropy.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/softmax_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/softmax_cpu.cpp ${CMAKE_CURRENT_LIST_DIR}/cross_entropy_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/softmax.cu ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cu)
