# tests/profiler — hg::profiler (core/profiler.h) on every device of the build:
# a small model's ops and kernels, declared work, nesting, the trace, the
# modelled time; on CUDA no host sync per launch; on cuda-emu count-only mode.
find_package(nlohmann_json 3 REQUIRED)
hg_add_test(test_profiler LABEL profiler SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_profiler.cpp
)
target_link_libraries(test_profiler PRIVATE nlohmann_json::nlohmann_json)
