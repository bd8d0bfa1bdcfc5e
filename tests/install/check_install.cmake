# The installed package works for a project outside the tree (./run test runs
# this as the CTest test `install_consumer`):
#   1. cmake --install the already-built tree into a fresh prefix under WORK;
#   2. build tests/install/consumer with find_package(halfgrad) and run it;
#   3. compile the same main.cpp with the flags `pkg-config --cflags --libs
#      halfgrad` gives and run it; then tests/install/custom_optimizer/main.cpp
#      (an optimizer written outside the tree) the same way;
#   4. configure tests/install/subdir_consumer (add_subdirectory of this source
#      tree): halfgrad::halfgrad exists, halfgrad's tests and programs are off.
#      Configure only: building would compile the whole library a second time.
#   5. README.md's "Use halfgrad in your project" quotes both consumer
#      CMakeLists.txt files verbatim.
# Any failure fails the test. Inputs: -DBUILD_DIR -DSOURCE_DIR -DWORK -DCXX
# [-DLAUNCHER=ccache] [-DGENERATOR=Ninja].
foreach(var BUILD_DIR SOURCE_DIR WORK CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_install.cmake needs -D${var}=...")
  endif()
endforeach()
set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/halfgrad/halfgrad.h include/halfgrad/core/tensor.h lib/cmake/halfgrad/halfgradConfig.cmake
          lib/cmake/halfgrad/halfgradConfigVersion.cmake lib/pkgconfig/halfgrad.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

# 1. find_package
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
set(gen "")
if(GENERATOR)
  set(gen -G ${GENERATOR})
endif()
run("configure the find_package consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer
    -B ${WORK}/consumer ${gen} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} ${launcher})
run("build the find_package consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer)
run("run the find_package consumer" ${WORK}/consumer/app)
message(STATUS "find_package consumer:\n${run_out}")

# 2. pkg-config
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run("pkg-config --cflags --libs halfgrad" ${PKG_CONFIG} --cflags --libs halfgrad)
string(STRIP "${run_out}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
set(cc ${CXX})
if(LAUNCHER)
  set(cc ${LAUNCHER} ${CXX})
endif()
run("compile the pkg-config consumer" ${cc} -std=c++20 ${SOURCE_DIR}/tests/install/consumer/main.cpp
    -o ${WORK}/app_pc ${flags} -Wl,-rpath,${prefix}/lib)
run("run the pkg-config consumer" ${WORK}/app_pc)
message(STATUS "pkg-config consumer:\n${run_out}")

# 2b. An optimizer written outside the tree (tests/install/custom_optimizer):
# f16 + fp32 masters under a GradScaler, overflow skips and resume bit-exact.
run("compile the custom-optimizer consumer" ${cc} -std=c++20 ${SOURCE_DIR}/tests/install/custom_optimizer/main.cpp
    -o ${WORK}/custom_optimizer ${flags} -Wl,-rpath,${prefix}/lib)
execute_process(COMMAND ${WORK}/custom_optimizer WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the custom-optimizer consumer failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "custom-optimizer consumer:\n${out}")

# 3. add_subdirectory (configure only)
file(MAKE_DIRECTORY ${WORK}/subdir_src)
file(COPY ${SOURCE_DIR}/tests/install/subdir_consumer/CMakeLists.txt ${SOURCE_DIR}/tests/install/consumer/main.cpp
     DESTINATION ${WORK}/subdir_src)
run("configure the add_subdirectory consumer" ${CMAKE_COMMAND} -S ${WORK}/subdir_src -B ${WORK}/subdir ${gen}
    -DHALFGRAD_DIR=${SOURCE_DIR} -DCMAKE_CXX_COMPILER=${CXX})
file(STRINGS ${WORK}/subdir/CMakeCache.txt cache REGEX "^HG_BUILD_(TESTS|EXAMPLES):BOOL=")
if(NOT cache MATCHES "HG_BUILD_TESTS:BOOL=OFF" OR NOT cache MATCHES "HG_BUILD_EXAMPLES:BOOL=OFF")
  message(FATAL_ERROR "add_subdirectory(halfgrad) should leave HG_BUILD_TESTS and HG_BUILD_EXAMPLES off: ${cache}")
endif()
if(NOT IS_DIRECTORY ${WORK}/subdir/CMakeFiles/app.dir OR EXISTS ${WORK}/subdir/halfgrad/tests
   OR EXISTS ${WORK}/subdir/halfgrad/examples)
  message(FATAL_ERROR "add_subdirectory consumer: expected the app target and none of halfgrad's tests or programs")
endif()

# 4. The README quotes the consumers' CMakeLists.txt files as they are.
file(READ ${SOURCE_DIR}/README.md readme)
foreach(f consumer/CMakeLists.txt subdir_consumer/CMakeLists.txt)
  file(READ ${SOURCE_DIR}/tests/install/${f} text)
  string(FIND "${readme}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not quote tests/install/${f} verbatim (keep the two in sync)")
  endif()
endforeach()
message(STATUS "add_subdirectory consumer configured; README quotes both CMakeLists.txt files")
