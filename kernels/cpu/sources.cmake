# kernels/cpu — the CPU kernels (every configuration).
list(APPEND HG_SOURCES
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/conv/pool_norm_cpu.cpp
  ${PROJECT_SOURCE_DIR}/kernels/softmax/cross_entropy_cpu.cpp
  ${PROJECT_SOURCE_DIR}/runtime/cpu/threads.cpp
  ${PROJECT_SOURCE_DIR}/kernels/cpu/convert_simd.cpp
  ${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math.cpp
  ${PROJECT_SOURCE_DIR}/runtime/cpu/cpu_dispatch.cpp
  ${PROJECT_SOURCE_DIR}/kernels/elementwise/f16_native.cpp
)
# The native f16 element-wise kernels (kernels/elementwise/f16_native.h) for
# AVX512-FP16, where the compiler has it (GCC 12, clang 14 on); f16_native.cpp
# calls them only after checking CPUID and XCR0.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-mavx512fp16 HG_CXX_HAS_AVX512FP16)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$" AND HG_CXX_HAS_AVX512FP16)
  list(APPEND HG_SOURCES ${PROJECT_SOURCE_DIR}/kernels/elementwise/f16_native_avx512fp16.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/elementwise/f16_native_avx512fp16.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3;-fno-math-errno;-mavx512fp16;-mavx512vl;-mavx512bw")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/elementwise/f16_native.cpp PROPERTIES COMPILE_DEFINITIONS
                                                                              HG_HAVE_F16_NATIVE=1)
endif()
# The vector math kernels, one file per x86 ISA (kernels/cpu/vec_math.h); only
# the dispatcher in vec_math.cpp calls them, after checking CPUID. -O3 and
# -fno-math-errno as for the other hot loops.
if(HG_HAVE_SLEEF)
  list(APPEND HG_SOURCES ${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_sse2.cpp ${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_avx2.cpp
       ${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_avx512.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_sse2.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_avx2.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx2;-mfma;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/cpu/vec_math_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx512f;-mavx2;-mfma;-mf16c")
  # The blocked flash attention tiles, one file per ISA as for the vector
  # math (kernels/attention/flash_attention_tiles.h); -O3 for the register blocks.
  list(APPEND HG_SOURCES ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_sse2.cpp
       ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_avx2.cpp ${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_avx512.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_sse2.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_avx2.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx2;-mfma")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/attention/flash_attention_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx512f;-mavx2;-mfma")
endif()
# The oneDNN paths (GEMM and convolution, and what they share), when the build
# has oneDNN (CMakeLists.txt, HG_WITH_ONEDNN).
if(HG_WITH_ONEDNN)
  list(APPEND HG_SOURCES ${PROJECT_SOURCE_DIR}/runtime/cpu/onednn.cpp ${PROJECT_SOURCE_DIR}/kernels/gemm/gemm_onednn.cpp
       ${PROJECT_SOURCE_DIR}/kernels/conv/conv_onednn.cpp)
endif()
# The f32 Adam loop in optimizer.cpp vectorises only when sqrt need not set
# errno (its argument, v / bias_correction2, is never negative) and at -O3
# (GCC 12 at -O2 only vectorises loops that need no remainder loop).
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The Adam kernels per x86 ISA (kernels/optimizer/optimizer_simd.h), chosen in
# optimizer.cpp from CPUID. -ffp-contract=off: a fused multiply-add would
# change the bits of optimizer_update's rule (-mavx512f allows FMA).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  list(APPEND HG_SOURCES ${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_avx2.cpp ${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_avx512.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_avx2.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3;-ffp-contract=off;-mavx2;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3;-ffp-contract=off;-mavx512f;-mavx2;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/optimizer/optimizer_cpu.cpp PROPERTIES COMPILE_DEFINITIONS HG_OPTIMIZER_SIMD=1)
endif()
# The same for foreach.cpp's per-instruction block loops (sqrt of a negative
# value is NaN either way; no errno is read).
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/foreach/foreach_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The GradScaler's check and unscale loops (amp_scale.cpp: an integer OR over
# the lanes) vectorise only at -O3 for the same reason.
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/amp_scale/amp_scale_cpu.cpp PROPERTIES COMPILE_OPTIONS "-O3")
# The element-wise loops (the float loop of Note [16-bit element-wise blocks
# on the CPU], the contiguous f32 loops) and the column reductions vectorise
# only at -O3: at -O2, GCC 12 compiled relu's select into a branch that
# mispredicts on random signs (2.7 ns per element, 12x a copy's time).
# The norms' row loops (kernels/norm/norm_cpu.cpp: the lane sums, the normalisation) likewise.
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/elementwise/elementwise_cpu.cpp ${PROJECT_SOURCE_DIR}/kernels/reduce/reduce_cpu.cpp
                            ${PROJECT_SOURCE_DIR}/kernels/norm/norm_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
# The same for the pooling and batch-norm loops (pool_norm.cpp): at -O2 the
# 2x2 max-pool's selects compiled into branches that mispredict on random data.
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/conv/pool_norm_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
