# kernels/reduce — sum, mean, max, min, norm and argmax over dims.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reduce_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/reduce_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reduce.cu)
# The column reductions vectorise only at -O3 (kernels/elementwise/sources.cmake says why for
# the element-wise loops).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/reduce_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
