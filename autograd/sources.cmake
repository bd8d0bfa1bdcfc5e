# autograd/ — floor 3.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/grad_mode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/node.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hooks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions_views.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions_index.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functions_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/function.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradcheck.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor_methods.cpp
)
