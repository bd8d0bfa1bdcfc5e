# kernels/optimizer — the fused SGD, Adam and AdamW steps over many parameters, with the LR schedule.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/optimizer_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/optimizer_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/optimizer.cu)
# The f32 Adam loop in optimizer_cpu.cpp vectorises only when sqrt need not set
# errno (its argument, v / bias_correction2, is never negative) and at -O3
# (GCC 12 at -O2 only vectorises loops that need no remainder loop).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The Adam kernels per x86 ISA (optimizer_simd.h), chosen in optimizer_cpu.cpp
# from CPUID. -ffp-contract=off: a fused multiply-add would change the bits of
# optimizer_update's rule (-mavx512f allows FMA).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/optimizer_avx2.cpp ${CMAKE_CURRENT_LIST_DIR}/optimizer_avx512.cpp)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer_avx2.cpp PROPERTIES COMPILE_OPTIONS "-O3;-ffp-contract=off;-mavx2;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3;-ffp-contract=off;-mavx512f;-mavx2;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer_cpu.cpp PROPERTIES COMPILE_DEFINITIONS HG_OPTIMIZER_SIMD=1)
endif()
