hg_add_test(test_kernels LABEL kernels SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_numerics.cpp
)
# The sequence-model building blocks (norms, embedding, indexing; issue 14).
hg_add_test(test_seq_ops LABEL kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_seq_ops.cpp)
find_package(nlohmann_json 3 REQUIRED)
target_link_libraries(test_seq_ops PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_seq_ops PRIVATE HG_TEST_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
