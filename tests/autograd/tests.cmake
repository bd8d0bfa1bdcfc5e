find_package(nlohmann_json 3 REQUIRED)
hg_add_test(test_autograd LABEL autograd SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_autograd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_torch_fixture.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_function.cpp
)
target_link_libraries(test_autograd PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_autograd PRIVATE
  HG_TEST_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
hg_add_test(test_tensor_members LABEL autograd SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_tensor_members.cpp
)
target_compile_definitions(test_tensor_members PRIVATE HG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
