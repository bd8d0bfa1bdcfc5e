hg_add_test(test_autograd LABEL autograd SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_autograd.cpp
)
