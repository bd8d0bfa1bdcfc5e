# `cmake --install` (docs/install.md): libhalfgrad, its headers under
# <prefix>/include/halfgrad/, a CMake package (find_package(halfgrad) gives the
# target halfgrad::halfgrad) and a pkg-config file (halfgrad.pc).
#
# Headers keep their in-tree paths below include/halfgrad/ (core/tensor.h ->
# include/halfgrad/core/tensor.h) and the umbrella header is
# include/halfgrad/halfgrad.h. The library's headers include each other as
# "core/tensor.h", so the interface include folders are both <prefix>/include
# (for <halfgrad/...>) and <prefix>/include/halfgrad (for those relative
# includes). In the build tree, build/<preset>/include/halfgrad is a link to the
# source folder, so <halfgrad/...> works for add_subdirectory users too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/halfgrad)
set(HG_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/halfgrad)

file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/include)
if(NOT EXISTS ${PROJECT_BINARY_DIR}/include/halfgrad)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/include/halfgrad SYMBOLIC)
endif()
target_include_directories(halfgrad PUBLIC
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${HG_INSTALL_INCLUDEDIR}>)
target_compile_features(halfgrad PUBLIC cxx_std_20)
set_target_properties(halfgrad PROPERTIES VERSION ${PROJECT_VERSION}
                                          SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

install(TARGETS halfgrad EXPORT halfgradTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Every public header of the library folders (the emulator's own sources are
# not installed; its CUDA stand-in headers are, for the emu build).
install(FILES halfgrad.h DESTINATION ${HG_INSTALL_INCLUDEDIR})
# Generated: core/version.h (hg::version(), HG_VERSION_*).
install(FILES ${PROJECT_BINARY_DIR}/generated/core/version.h DESTINATION ${HG_INSTALL_INCLUDEDIR}/core)
foreach(dir core runtime kernels autograd nn optim amp data train)
  install(DIRECTORY ${dir}/ DESTINATION ${HG_INSTALL_INCLUDEDIR}/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh"
          PATTERN "emu" EXCLUDE)
endforeach()
if(HG_CUDA_MODE STREQUAL "emu")
  install(DIRECTORY runtime/emu/include/ DESTINATION ${HG_INSTALL_INCLUDEDIR}/runtime/emu/include)
endif()

install(EXPORT halfgradTargets NAMESPACE halfgrad:: DESTINATION ${HG_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/halfgradConfig.cmake.in
  ${PROJECT_BINARY_DIR}/halfgradConfig.cmake INSTALL_DESTINATION ${HG_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/halfgradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)  # 0.x: minor versions break
install(FILES ${PROJECT_BINARY_DIR}/halfgradConfig.cmake ${PROJECT_BINARY_DIR}/halfgradConfigVersion.cmake
        DESTINATION ${HG_INSTALL_CMAKEDIR})

# pkg-config: the same usage requirements by hand (fmt is public: core/log.h).
set(HG_PC_CFLAGS "")
set(HG_PC_LIBS "")
set(HG_PC_REQUIRES "fmt")
if(NOT HG_CUDA_MODE STREQUAL "off")
  string(APPEND HG_PC_CFLAGS " -DHG_WITH_CUDA=1")
endif()
if(HG_CUDA_MODE STREQUAL "emu")
  string(APPEND HG_PC_CFLAGS " -DHG_CUDA_EMU=1 -I\${includedir}/halfgrad/runtime/emu/include")
  string(APPEND HG_PC_LIBS " -lboost_context")
elseif(HG_CUDA_MODE STREQUAL "gpu")
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS HG_CUDNN_INCLUDE_DIR)
    string(APPEND HG_PC_CFLAGS " -I${dir}")
  endforeach()
  string(APPEND HG_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt ${HG_CUDNN_LIBRARY}")
endif()
# prefix is found from the .pc file's own folder, so the install can move.
file(RELATIVE_PATH HG_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" HG_PC_TO_PREFIX "${HG_PC_TO_PREFIX}")
set(HG_PC_BUILD_NAME ${HG_CUDA_MODE})
if(HG_CUDA_MODE STREQUAL "off")
  set(HG_PC_BUILD_NAME cpu)
endif()
configure_file(cmake/halfgrad.pc.in ${PROJECT_BINARY_DIR}/halfgrad.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/halfgrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
