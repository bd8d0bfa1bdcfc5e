hg_add_test(test_core LABEL core ARGS "~[needs-thp]" SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_dtype.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_readme.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_half.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bfloat16.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_float8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_philox.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_allocator.cpp
)
# The same tests through glibc (the CPU block cache off: Note [CPU block cache]).
add_test(NAME test_core_no_block_cache COMMAND test_core "~[needs-thp]")
set_tests_properties(test_core_no_block_cache PROPERTIES ENVIRONMENT HG_CPU_BLOCK_CACHE=0 LABELS core)
# The allocator's tests with a 1 MiB budget for large cached blocks (the
# eviction path of Note [CPU block cache]).
add_test(NAME test_core_small_block_cache COMMAND test_core "[allocator]~[needs-thp]")
set_tests_properties(test_core_small_block_cache PROPERTIES ENVIRONMENT HG_CPU_CACHE_MB=1 LABELS core)
# The allocator's tests without the huge-page advice (Note [Huge pages for
# large host blocks] in core/allocator.cpp).
add_test(NAME test_core_no_huge_pages COMMAND test_core "[allocator]~[needs-thp]")
set_tests_properties(test_core_no_huge_pages PROPERTIES ENVIRONMENT HG_CPU_HUGE_PAGES=0 LABELS core)
# The huge-page case itself (skipped without transparent huge pages), with the
# advice on and off.
hg_add_skippable_test(test_core needs-thp core)
hg_add_skippable_test(test_core needs-thp core NAME test_core_no_huge_pages_thp ENVIRONMENT HG_CPU_HUGE_PAGES=0)
