# install_consumer: cmake --install into a temp prefix, then an out-of-tree
# project uses it through find_package and through pkg-config
# (check_install.cmake). cpu build only: the other builds export the same way.
if(HG_CUDA_MODE STREQUAL "off" AND NOT HG_SANITIZE)
  set(hg_launcher "")
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    set(hg_launcher -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  add_test(NAME install_consumer
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/install_consumer -DCXX=${CMAKE_CXX_COMPILER}
                   -DGENERATOR=${CMAKE_GENERATOR} ${hg_launcher}
                   -P ${CMAKE_CURRENT_LIST_DIR}/check_install.cmake)
  set_tests_properties(install_consumer PROPERTIES LABELS install)
endif()

# The out-of-tree custom-optimizer program (check_install.cmake builds it
# against the installed cpu package) also runs in-tree in every build, so the
# emu build runs it on cuda-emu too.
add_executable(custom_optimizer_app ${CMAKE_CURRENT_LIST_DIR}/custom_optimizer/main.cpp)
target_link_libraries(custom_optimizer_app PRIVATE halfgrad)
hg_target_warnings(custom_optimizer_app)
hg_configure_cuda(custom_optimizer_app PRIVATE)
add_test(NAME custom_optimizer_app COMMAND custom_optimizer_app)
set_tests_properties(custom_optimizer_app PROPERTIES LABELS "optim;install")
