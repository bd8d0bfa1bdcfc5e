# kernels/foreach — foreach_apply: one element-wise program over lists of tensors (the open optimizer API).
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/foreach_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/foreach_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/foreach.cu)
# The per-instruction block loops vectorise only at -O3 and without errno (sqrt of
# a negative value is NaN either way; no errno is read).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/foreach_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
