# core/ — floor 0. Explicit list; add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dtype.cpp
  ${CMAKE_CURRENT_LIST_DIR}/log.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor_views.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor_factories.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor_print.cpp
  ${CMAKE_CURRENT_LIST_DIR}/generator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/version.cpp
  ${CMAKE_CURRENT_LIST_DIR}/profiler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hash.cpp
)
# core/version.h: generated from project(halfgrad VERSION ...) into
# <build>/generated (CMakeLists.txt puts that folder on the include path).
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in ${PROJECT_BINARY_DIR}/generated/core/version.h @ONLY)
# Error messages name source files from the repository root (core/error.cpp,
# short_path): the checkout's path, with its trailing slash.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/error.cpp PROPERTIES COMPILE_DEFINITIONS
                            "HG_SOURCE_DIR=\"${PROJECT_SOURCE_DIR}/\"")
