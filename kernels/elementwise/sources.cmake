# kernels/elementwise — unary, binary and ternary element-wise ops, casts and
# strided copies (the functors, the engine that runs them, the native f16 path).
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/elementwise_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/elementwise_cpu.cpp ${CMAKE_CURRENT_LIST_DIR}/f16_native.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu ${CMAKE_CURRENT_LIST_DIR}/elementwise_unary.cu ${CMAKE_CURRENT_LIST_DIR}/elementwise_binary.cu)
# The element-wise loops (the float loop of Note [16-bit element-wise blocks
# on the CPU], the contiguous f32 loops) vectorise only at -O3: at -O2, GCC 12
# compiled relu's select into a branch that mispredicts on random signs (2.7 ns
# per element, 12x a copy's time).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/elementwise_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The native f16 element-wise kernels (f16_native.h) for AVX512-FP16, where the
# compiler has it (GCC 12, clang 14 on); f16_native.cpp calls them only after
# checking CPUID and XCR0.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-mavx512fp16 HG_CXX_HAS_AVX512FP16)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$" AND HG_CXX_HAS_AVX512FP16)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/f16_native_avx512fp16.cpp)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/f16_native_avx512fp16.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3;-fno-math-errno;-mavx512fp16;-mavx512vl;-mavx512bw")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/f16_native.cpp PROPERTIES COMPILE_DEFINITIONS HG_HAVE_F16_NATIVE=1)
endif()
