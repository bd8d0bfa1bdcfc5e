# Tests of the CUDA-on-CPU emulator itself (emu configuration only).
if(HG_CUDA_MODE STREQUAL "emu")
  hg_add_test(test_emu LABEL emu SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_kernels.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_bugs.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_assert.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_warp.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_half.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_perf.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_wmma.cu
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_mma_sm80.cu
  )
endif()

# Death test of the asan build: an out-of-bounds write in a kernel must produce
# an AddressSanitizer report (device memory and dynamic shared memory are exact
# heap allocations). "control" is the same program without the bug.
if(HG_CUDA_MODE STREQUAL "emu" AND HG_SANITIZE)
  add_executable(emu_asan_oob ${CMAKE_CURRENT_LIST_DIR}/asan_oob.cu)
  target_link_libraries(emu_asan_oob PRIVATE halfgrad)
  hg_target_warnings(emu_asan_oob)
  hg_configure_cuda(emu_asan_oob PRIVATE)
  foreach(mode global shared)
    add_test(NAME emu_asan_oob_${mode} COMMAND emu_asan_oob ${mode})
    set_tests_properties(emu_asan_oob_${mode} PROPERTIES LABELS emu
                         PASS_REGULAR_EXPRESSION "AddressSanitizer: heap-buffer-overflow")
  endforeach()
  add_test(NAME emu_asan_oob_control COMMAND emu_asan_oob none)
  set_tests_properties(emu_asan_oob_control PROPERTIES LABELS emu)
endif()
