# kernels/cpu — machinery the CPU kernels of every family share: the loops, the
# 16-bit conversions, the vector math (SLEEF) per ISA.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/convert_simd.cpp ${CMAKE_CURRENT_LIST_DIR}/vec_math.cpp)
# The vector math kernels, one file per x86 ISA (vec_math.h; they also compile
# the norm family's SIMD rows, kernels/norm/norm_simd_impl.h); only the
# dispatcher in vec_math.cpp calls them, after checking CPUID. -O3 and
# -fno-math-errno as for the other hot loops.
if(HG_HAVE_SLEEF)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/vec_math_sse2.cpp ${CMAKE_CURRENT_LIST_DIR}/vec_math_avx2.cpp ${CMAKE_CURRENT_LIST_DIR}/vec_math_avx512.cpp)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_math_sse2.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_math_avx2.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx2;-mfma;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_math_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx512f;-mavx2;-mfma;-mf16c")
endif()
