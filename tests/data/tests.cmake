hg_add_test(test_data LABEL data ARGS "~[needs-cuda]~[needs-fashion-mnist]" SOURCES
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
# The prefetch cases on a CUDA device and the real Fashion-MNIST: skipped
# (not passed) where they are missing.
hg_add_skippable_test(test_data needs-cuda data)
hg_add_skippable_test(test_data needs-fashion-mnist data)
