# The AVX512-FP16 build of the native f16 kernels (kernels/elementwise/f16_native_impl.h
# compiled by kernels/elementwise/f16_native_avx512fp16.cpp) must compute with the
# AVX512-FP16 instructions: its functions in the library (namespace
# hg::cpu::f16_avx512fp16, found with nm) must contain vaddph, vsubph, vmulph,
# vdivph, vsqrtph and vcmp*ph, and no call to libgcc's software _Float16
# routines (__extendhfsf2, __truncsfhf2, the __*hf2 comparisons).
#   cmake -DNM=nm -DOBJDUMP=objdump -DLIB=libhalfgrad.so -P check_f16_native_asm.cmake
execute_process(COMMAND ${NM} -C -S --defined-only ${LIB} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${LIB} failed (${rc})")
endif()
# "<address> <size> <type> <name>" lines of the namespace's functions: the
# address range they span.
string(REGEX MATCHALL "[0-9a-f]+ [0-9a-f]+ [tT] [^\n]*f16_avx512fp16::[^\n]*" fns "${syms}")
if(NOT fns)
  message(FATAL_ERROR "no function of hg::cpu::f16_avx512fp16 in ${LIB}")
endif()
set(lo "")
set(hi 0)
foreach(fn IN LISTS fns)
  string(REGEX MATCH "^([0-9a-f]+) ([0-9a-f]+)" _ "${fn}")
  math(EXPR start "0x${CMAKE_MATCH_1}")
  math(EXPR end "0x${CMAKE_MATCH_1} + 0x${CMAKE_MATCH_2}")
  if(lo STREQUAL "" OR start LESS lo)
    set(lo ${start})
  endif()
  if(end GREATER hi)
    set(hi ${end})
  endif()
endforeach()
execute_process(COMMAND ${OBJDUMP} -d -r --no-show-raw-insn --start-address=${lo} --stop-address=${hi} ${LIB}
                OUTPUT_VARIABLE body RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -d ${LIB} failed (${rc})")
endif()
foreach(insn vaddph vsubph vmulph vdivph vsqrtph "vcmp[a-z]*ph")
  if(NOT body MATCHES "[ \t]${insn}[ \t]")
    message(FATAL_ERROR "the AVX512-FP16 kernels contain no ${insn}")
  endif()
endforeach()
if(body MATCHES "(extendhfsf2|truncsfhf2|__[a-z]+hf2)")
  message(FATAL_ERROR "the AVX512-FP16 kernels call a software _Float16 routine: ${CMAKE_MATCH_1}")
endif()
list(LENGTH fns count)
message(STATUS "the ${count} AVX512-FP16 kernel functions use vaddph, vsubph, vmulph, vdivph, vsqrtph, vcmpph; "
               "no software _Float16 calls")
