hg_add_test(test_nn LABEL nn SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_serialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_header_scale.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_modules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_api.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpt.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_transformer.cpp
)
hg_add_test(test_libtorch_idioms LABEL nn SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_libtorch_idioms.cpp
)
target_compile_definitions(test_nn PRIVATE
  HG_NN_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
