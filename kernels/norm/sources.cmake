# kernels/norm — layer_norm and rms_norm.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/norm_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/norm_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/norm.cu)
# The row loops (the lane sums, the normalisation) vectorise only at -O3.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/norm_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The SIMD rows (norm_simd_impl.h) are compiled per ISA in kernels/cpu/vec_math_*.cpp.
