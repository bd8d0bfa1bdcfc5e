# ctest script: the main job on 2000 samples for one epoch must exit 0, print its
# epoch line and reach a test accuracy of at least MIN_ACCURACY (metrics.jsonl).
# 16 AdamW steps take the MLP to ~69% (cpu, seed 0); chance is 10%, and a model
# whose gradients are wrong or zero stays near it, so 55% separates the two.
#   cmake -DHG_TRAIN=<hg-train> -DDEVICE=<cpu|cuda> -DWORK=<dir> [-DMIN_ACCURACY=0.55] -P check_smoke.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED MIN_ACCURACY)
  set(MIN_ACCURACY 0.55)
endif()
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${HG_TRAIN}" --limit 2000 --test-limit 1000 --epochs 1 --device ${DEVICE}
                        --out "${WORK}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0 AND err MATCHES "but 0 CUDA device\\(s\\) are available")
  # A gpu build on a machine without a GPU: CTest reports this line as skipped.
  message("hg_train_smoke skipped: no CUDA device")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hg-train exited with ${rc}:\n${err}")
endif()
if(NOT out MATCHES "epoch 1/1: train loss [0-9.]+ +test loss [0-9.]+ +accuracy")
  message(FATAL_ERROR "hg-train printed no epoch summary:\n${err}")
endif()
if(NOT EXISTS "${WORK}/metrics.jsonl")
  message(FATAL_ERROR "hg-train wrote no ${WORK}/metrics.jsonl")
endif()
file(STRINGS "${WORK}/metrics.jsonl" lines)
list(GET lines -1 last)
string(JSON accuracy ERROR_VARIABLE json_error GET "${last}" test_accuracy)
if(json_error)
  message(FATAL_ERROR "metrics.jsonl's last line has no test_accuracy (${json_error}): ${last}")
endif()
# math() works on integers: compare per-mille ("0.694" -> 694).
if(accuracy MATCHES "^1(\\.0*)?$")
  set(permille 1000)
elseif(accuracy MATCHES "^0\\.[0-9]+$")
  string(SUBSTRING "${accuracy}000" 2 3 digits)
  math(EXPR permille "1${digits} - 1000")
else()
  message(FATAL_ERROR "test_accuracy '${accuracy}' is not a number in [0, 1]")
endif()
string(SUBSTRING "${MIN_ACCURACY}000" 2 3 floor_digits)
math(EXPR permille_floor "1${floor_digits} - 1000")
if(permille LESS permille_floor)
  message(FATAL_ERROR "test accuracy ${accuracy} is below the floor ${MIN_ACCURACY}: the model did not learn")
endif()
message(STATUS "hg_train_smoke: exit 0, test accuracy ${accuracy} >= ${MIN_ACCURACY}")
