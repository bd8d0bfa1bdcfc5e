# kernels/cpu — reference kernels (every configuration).
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/../ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cpp
)
