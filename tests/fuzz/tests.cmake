# Fuzz harnesses in the normal build (g++): fuzz_replay runs them on the
# committed seed corpus and on every past crash input (ctest: fuzz_replay_*),
# and fuzz_make_corpus regenerates the seeds. The libFuzzer binaries are a
# separate clang build: tests/fuzz/CMakeLists.txt, driven by `./run fuzz`.
set(hg_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
find_package(ZLIB REQUIRED)
add_library(hg_fuzz_harnesses OBJECT
  ${hg_fuzz_dir}/fuzz_common.cpp ${hg_fuzz_dir}/fuzz_safetensors.cpp ${hg_fuzz_dir}/fuzz_checkpoint.cpp
  ${hg_fuzz_dir}/fuzz_idx.cpp ${hg_fuzz_dir}/fuzz_npy.cpp ${hg_fuzz_dir}/fuzz_state.cpp)
target_link_libraries(hg_fuzz_harnesses PUBLIC halfgrad ZLIB::ZLIB)
hg_target_warnings(hg_fuzz_harnesses)
add_executable(fuzz_replay ${hg_fuzz_dir}/replay_main.cpp $<TARGET_OBJECTS:hg_fuzz_harnesses>)
target_link_libraries(fuzz_replay PRIVATE halfgrad ZLIB::ZLIB)
hg_target_warnings(fuzz_replay)
add_executable(fuzz_make_corpus ${hg_fuzz_dir}/make_corpus.cpp)
target_link_libraries(fuzz_make_corpus PRIVATE halfgrad ZLIB::ZLIB)
hg_target_warnings(fuzz_make_corpus)
foreach(target safetensors checkpoint idx npy state)
  add_test(NAME fuzz_replay_${target}
           COMMAND fuzz_replay ${target} ${hg_fuzz_dir}/corpus/${target} ${hg_fuzz_dir}/crashes/${target})
  set_tests_properties(fuzz_replay_${target} PROPERTIES LABELS fuzz)
endforeach()
