# tests/amp — mixed precision: the GradScaler, the policy table, autocast.
hg_add_test(test_amp LABEL amp SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_grad_scaler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_policy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_autocast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_fp8_training.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_state_rules.cpp
)
# The policy test compares docs/amp.md with the table.
target_compile_definitions(test_amp PRIVATE HG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
