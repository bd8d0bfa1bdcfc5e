hg_add_test(test_optim LABEL optim SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_lr_scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_clip_grad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_readme_training.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_options.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_custom_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_param_groups.cpp
)
# The README snippet test compares README.md with its own source.
target_compile_definitions(test_optim PRIVATE HG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
