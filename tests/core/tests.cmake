hg_add_test(test_core LABEL core SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_dtype.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_readme.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_half.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bfloat16.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_philox.cpp
)
