# tests/cuda — the CUDA runtime layer, caching allocator, library stand-ins and
# device hooks. Built in the emu and gpu configurations; runs anywhere in emu
# (tests that need a real device return early when none is available).
if(NOT HG_CUDA_MODE STREQUAL "off")
  hg_add_test(test_cuda_runtime LABEL cuda SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_runtime.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_shim.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_cublas.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_caching_allocator.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_device_hooks.cpp
  )
endif()
