# The AVX512-FP16 build of the native f16 kernels (kernels/cpu/f16_native_impl.h
# compiled by kernels/cpu/f16_native_avx512fp16.cpp) must compute with the
# AVX512-FP16 instructions: its functions in the library (namespace
# hg::cpu::f16_avx512fp16) must contain vaddph, vsubph, vmulph, vdivph, vsqrtph
# and vcmp*ph, and no call to libgcc's software _Float16 routines
# (__extendhfsf2, __truncsfhf2, __*hf2 comparisons).
#   cmake -DOBJDUMP=objdump -DLIB=libhalfgrad.so -P check_f16_native_asm.cmake
execute_process(COMMAND ${OBJDUMP} -d -C --no-show-raw-insn ${LIB} OUTPUT_VARIABLE asm RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -d ${LIB} failed (${rc})")
endif()
# Keep the functions of the AVX512-FP16 namespace: a function starts at a
# line "<address> <name>:" and runs to the next blank line.
string(REPLACE ";" "," asm "${asm}")
string(REPLACE "\n" ";" lines "${asm}")
set(body "")
set(inside FALSE)
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-f]+ <.*>:$")
    if(line MATCHES "f16_avx512fp16::")
      set(inside TRUE)
    else()
      set(inside FALSE)
    endif()
  endif()
  if(inside)
    string(APPEND body "${line}\n")
  endif()
endforeach()
if(body STREQUAL "")
  message(FATAL_ERROR "no function of hg::cpu::f16_avx512fp16 in ${LIB}")
endif()
foreach(insn vaddph vsubph vmulph vdivph vsqrtph "vcmp[a-z]*ph")
  if(NOT body MATCHES "[ \t]${insn}[ \t]")
    message(FATAL_ERROR "the AVX512-FP16 kernels contain no ${insn}")
  endif()
endforeach()
if(body MATCHES "(extendhfsf2|truncsfhf2|__[a-z]+hf2)")
  message(FATAL_ERROR "the AVX512-FP16 kernels call a software _Float16 routine: ${CMAKE_MATCH_1}")
endif()
message(STATUS "the AVX512-FP16 kernels use vaddph, vsubph, vmulph, vdivph, vsqrtph, vcmpph; no software _Float16 calls")
