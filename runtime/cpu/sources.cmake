# runtime/cpu — what the CPU kernels run on: the thread pool policy (OpenMP),
# the CPU feature and ISA decisions, the oneDNN engine and stream.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/threads.cpp ${CMAKE_CURRENT_LIST_DIR}/cpu_dispatch.cpp)
if(HG_WITH_ONEDNN)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/onednn.cpp)
endif()
