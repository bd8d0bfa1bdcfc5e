hg_add_test(test_optim LABEL optim SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_optimizer.cpp
)
