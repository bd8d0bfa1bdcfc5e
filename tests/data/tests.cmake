hg_add_test(test_data LABEL data SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_idx.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_dataloader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_prefetch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_npy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_distributed_sampler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_text.cpp
)
# The IDX tests gzip their fixtures with zlib directly.
find_package(ZLIB REQUIRED)
target_link_libraries(test_data PRIVATE ZLIB::ZLIB)
