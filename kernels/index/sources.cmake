# kernels/index — index_select/index_add, embedding, gather/scatter_add, cat/stack, masked_fill, tril/triu.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/index_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index.cu)
