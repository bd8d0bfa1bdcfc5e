# tests/amp — mixed precision: the GradScaler, the policy table, autocast.
hg_add_test(test_amp LABEL amp SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_grad_scaler.cpp
)
