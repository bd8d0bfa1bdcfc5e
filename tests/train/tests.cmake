# train/: hg::train::Trainer (a user's model, resume, accumulation) and the
# precision table; hg-train itself is tested by examples/check_*.
hg_add_test(test_train LABEL train SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_trainer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_error_locations.cpp
)
