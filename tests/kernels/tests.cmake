# The [cuda] cases (tests/kernels/test_conv_cuda.cpp: conv2d through cuDNN,
# CUDA pooling and batch norm against the CPU) are their own CTest test,
# skipped where there is no CUDA device or no usable cuDNN.
hg_add_test(test_kernels LABEL kernels ARGS "~[cuda]~[gemm-native]~[gemm-onednn-f32]~[threads-contention]~[needs-avx2-f16c]~[needs-f16-soft]~[needs-avx512fp16]" SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_strided_copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_conv_torch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_conv_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_numerics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_convert_simd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_glu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_vec_math.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cpu_dispatch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_threads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/f16_native_soft.cpp
)
# The native f16 element-wise kernels (kernels/elementwise/f16_native.h): the object
# compiled with -mavx512fp16 must hold the AVX512-FP16 instructions and no
# software _Float16 calls (nm + objdump; binutils comes with the compiler).
# f16_native_soft.cpp is the same source without the flags, run by
# test_cpu_dispatch.cpp. Not in a sanitizer build: there the instrumented
# object is not the one a release ships, and its instruction selection
# differs (under ASan + UBSan GCC 12 keeps the sqrt kernel's per-lane f32
# square root apart instead of forming vsqrtph).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/f16_native_soft.cpp PROPERTIES COMPILE_OPTIONS "-O2")
find_program(HG_OBJDUMP objdump)
find_program(HG_NM nm)
if(HG_CXX_HAS_AVX512FP16 AND HG_OBJDUMP AND HG_NM AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$"
   AND NOT HG_SANITIZE)
  add_test(NAME check_f16_native_asm
           COMMAND ${CMAKE_COMMAND} -DNM=${HG_NM} -DOBJDUMP=${HG_OBJDUMP} -DLIB=$<TARGET_FILE:halfgrad>
                   -P ${CMAKE_CURRENT_LIST_DIR}/check_f16_native_asm.cmake)
  set_tests_properties(check_f16_native_asm PROPERTIES LABELS kernels)
endif()
# The CPU GEMM paths (kernels/gemm/CPU.md, "CPU GEMM paths"): the native bf16 GEMM
# (oneDNN) against the f64 reference, skipped on CPUs without AVX512_BF16 / AMX;
# and the GEMM tests again with the widen-to-fp32 fallback forced.
add_test(NAME test_gemm_native_bf16 COMMAND test_kernels "[gemm-native]")
set_tests_properties(test_gemm_native_bf16 PROPERTIES LABELS kernels)
hg_test_requires(test_gemm_native_bf16 cpu-bf16)
# Cases that need a CPU feature or a compiler capability (tests/skip.h):
# skipped, not passed, where it is missing.
hg_add_skippable_test(test_kernels needs-avx2-f16c kernels)
hg_add_skippable_test(test_kernels needs-f16-soft kernels)
hg_add_skippable_test(test_kernels needs-avx512fp16 kernels)
# The thread governor under real contention (busy child processes on every
# core; runtime/cpu/threads.cpp): the cpu build only, skipped with one core or
# no per-thread schedstat.
if(HG_CUDA_MODE STREQUAL "off")
  add_test(NAME test_thread_governor COMMAND test_kernels "[threads-contention]")
  set_tests_properties(test_thread_governor PROPERTIES LABELS kernels)
  hg_test_requires(test_thread_governor cpu-contention)
endif()
add_test(NAME test_gemm_onednn_f32 COMMAND test_kernels "[gemm-onednn-f32]")
set_tests_properties(test_gemm_onednn_f32 PROPERTIES LABELS kernels)
hg_test_requires(test_gemm_onednn_f32 cpu-f32-onednn)
# The per-element 16-bit loop (Note [16-bit element-wise blocks on the CPU]
# off). CPU only: the cpu build (the CUDA builds would rerun the emulated
# kernels, which the switch does not touch).
if(HG_CUDA_MODE STREQUAL "off")
  add_test(NAME test_elementwise_no_blocks COMMAND test_kernels "[elementwise]~[cuda]")
  set_tests_properties(test_elementwise_no_blocks PROPERTIES ENVIRONMENT "HG_CPU_EW_BLOCKS=0;HG_CPU_MATH=scalar"
                                                                LABELS kernels)
  # The scalar math path (kernels/cpu/vec_math.h, HG_CPU_MATH=scalar: glibc's
  # libm through the functors) and SLEEF at the SSE2 baseline
  # (HG_CPU_ISA=generic, which also forces the generic 16-bit converters and
  # lane sums of the reductions) through the element-wise, softmax and
  # reduction tests; the default run covers SLEEF at the CPU's widest ISA.
  add_test(NAME test_kernels_scalar_math COMMAND test_kernels "[elementwise],[softmax]~[cuda]")
  set_tests_properties(test_kernels_scalar_math PROPERTIES ENVIRONMENT HG_CPU_MATH=scalar LABELS kernels)
  add_test(NAME test_kernels_generic_isa COMMAND test_kernels "[elementwise],[softmax],[reduce]~[cuda]")
  set_tests_properties(test_kernels_generic_isa PROPERTIES ENVIRONMENT HG_CPU_ISA=generic LABELS kernels)
endif()
# The CPU convolution paths (kernels/conv/CPU.md, "CPU convolution paths"): the
# [conv] tests again with im2col + GEMM forced (the fallback and reference)
# and with oneDNN forced (on CPUs where auto mode would not take it).
add_test(NAME test_conv_im2col COMMAND test_kernels "[conv]~[cuda]")
set_tests_properties(test_conv_im2col PROPERTIES ENVIRONMENT HG_CPU_CONV=im2col LABELS kernels)
add_test(NAME test_conv_onednn COMMAND test_kernels "[conv]~[cuda]")
set_tests_properties(test_conv_onednn PROPERTIES ENVIRONMENT HG_CPU_CONV=onednn LABELS kernels)
add_test(NAME test_gemm_widen COMMAND test_kernels "[gemm]~[cuda]")
set_tests_properties(test_gemm_widen PROPERTIES ENVIRONMENT HG_CPU_GEMM=widen LABELS kernels)
# -DHG_WITH_ONEDNN=OFF without a second build: test_gemm and test_conv take
# their expected reasons from cpu::gemm_has_onednn(), so they hold in both
# configurations, and the files whose code differs (kernels/gemm/gemm_cpu.cpp and
# kernels/conv/conv_cpu.cpp, their #else branches) are compiled once more here
# without HG_HAVE_ONEDNN, with the warnings of the library (compile only:
# linking them would need a second libhalfgrad).
if(HG_WITH_ONEDNN)
  add_library(hg_gemm_without_onednn OBJECT ${PROJECT_SOURCE_DIR}/kernels/gemm/gemm_cpu.cpp
                                            ${PROJECT_SOURCE_DIR}/kernels/conv/conv_cpu.cpp)
  target_include_directories(hg_gemm_without_onednn PRIVATE $<TARGET_PROPERTY:halfgrad,INCLUDE_DIRECTORIES>)
  target_compile_definitions(hg_gemm_without_onednn PRIVATE
    $<FILTER:$<TARGET_PROPERTY:halfgrad,COMPILE_DEFINITIONS>,EXCLUDE,^HG_HAVE_ONEDNN>)
  target_link_libraries(hg_gemm_without_onednn PRIVATE fmt::fmt OpenMP::OpenMP_CXX)
  hg_target_warnings(hg_gemm_without_onednn)
endif()
find_package(nlohmann_json 3 REQUIRED)
target_link_libraries(test_kernels PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_kernels PRIVATE HG_KERNEL_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
if(NOT HG_CUDA_MODE STREQUAL "off")
  add_test(NAME test_kernels_cuda COMMAND test_kernels "[cuda]")
  set_tests_properties(test_kernels_cuda PROPERTIES LABELS kernels)
  hg_test_requires(test_kernels_cuda cuda cudnn)
endif()
# The sequence-model building blocks: LayerNorm/RMSNorm (test_norm.cpp), the
# embedding and the indexing and shape ops (test_index.cpp).
hg_add_test(test_norm_index LABEL kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_index.cpp)
target_link_libraries(test_norm_index PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_norm_index PRIVATE HG_TEST_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
# The fused (flash) attention kernels of kernels/attention/flash_attention.h against an
# f64 reference, CPU vs CUDA (emu), bad input.
hg_add_test(test_flash_attention LABEL kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_flash_attention.cpp)
# The cuDNN attention path (kernels/attention/attention_cudnn.h; cuda-emu: the graph
# stand-in) against an f64 reference and the math path, and the path switch.
hg_add_test(test_attention_cudnn LABEL kernels ARGS "~[needs-cudnn-sdpa]" SOURCES
            ${CMAKE_CURRENT_LIST_DIR}/test_attention_cudnn.cpp)
# Its cases on the cuDNN path: skipped where the path cannot run (the cpu build,
# a GPU or cuDNN without the fused attention).
hg_add_skippable_test(test_attention_cudnn needs-cudnn-sdpa kernels)
# Batched matmul and scaled_dot_product_attention's math path .
hg_add_test(test_attention LABEL kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention.cpp)
target_link_libraries(test_attention PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_attention PRIVATE HG_TEST_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
# The linear-layer GEMM path: folded linear/matmul, the CUDA column reduction,
# the cuBLASLt epilogues (emu stand-in) and host waits of a training step.
hg_add_test(test_linear_path LABEL kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_linear_path.cpp)
