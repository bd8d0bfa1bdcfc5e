hg_add_test(test_kernels LABEL kernels SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cpp
)
