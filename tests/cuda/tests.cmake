# tests/cuda — the CUDA runtime layer, caching allocator, library stand-ins and
# device hooks. Built in the emu and gpu configurations. Skipped (not passed)
# where there is no CUDA device; the cases that need cuDNN ([cudnn]) are their
# own CTest test, skipped where cuDNN cannot be created (tests/main.cpp).
if(NOT HG_CUDA_MODE STREQUAL "off")
  hg_add_test(test_cuda_runtime LABEL cuda REQUIRES cuda ARGS "~[cudnn]" SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_runtime.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_emu_shim.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_cublas.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_caching_allocator.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_device_hooks.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_cudnn_conv.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_cudnn_graph.cpp
  )
  add_test(NAME test_cuda_cudnn COMMAND test_cuda_runtime "[cudnn]")
  set_tests_properties(test_cuda_cudnn PROPERTIES LABELS cuda)
  hg_test_requires(test_cuda_cudnn cudnn)
endif()
