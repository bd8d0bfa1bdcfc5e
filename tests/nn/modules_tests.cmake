hg_add_test(test_nn_modules LABEL nn SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_modules.cpp)
