# optim/ — floor 4.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cpp
)
