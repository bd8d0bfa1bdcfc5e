# ctest script: hg-train interrupted twice (--max-steps, once mid-epoch, once
# in the second epoch) and resumed must end with a checkpoint byte-identical to
# an uninterrupted run's, and with the same metrics.jsonl (per-epoch and
# sub-epoch train losses). Also checks
# metrics.jsonl / curves.svg exist and that a resume with other options fails.
#   cmake -DHG_TRAIN=<hg-train> -DDEVICE=<cpu|cuda> -DWORK=<dir> [-DMODEL=mlp|cnn] -P check_resume.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
# 1200 samples / batch 100 = 12 steps an epoch; clipping and warmup exercised.
# amp-fp16 (the seed recipe), so the loss scaler's state travels too.
set(common --limit 1200 --test-limit 300 --epochs 2 --batch-size 100 --warmup-steps 5 --clip-grad 1.0
           --device ${DEVICE} --precision amp-fp16)
if(DEFINED MODEL)
  list(APPEND common --model ${MODEL})
endif()

include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")

train(TRUE ${common} --out "${WORK}/full")
train(TRUE ${common} --out "${WORK}/split" --max-steps 7)
if(NOT last_out MATCHES "stopped after step 7")
  message(FATAL_ERROR "expected a stop at step 7:\n${last_out}")
endif()
train(TRUE ${common} --out "${WORK}/split" --resume --max-steps 17)
if(NOT last_out MATCHES "resuming from .* at epoch 1, batch 7 \\(step 7\\)")
  message(FATAL_ERROR "expected a resume at epoch 1 batch 7:\n${last_out}")
endif()
train(TRUE ${common} --out "${WORK}/split" --resume)

require_same_checkpoints()

foreach(run full split)
  file(STRINGS "${WORK}/${run}/metrics.jsonl" lines)
  set(losses_${run} "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "\"type\":\"epoch\"")
      continue()
    endif()
    string(REGEX MATCH "\"train_loss\":[-0-9.eE+]+" loss "${line}")
    list(APPEND losses_${run} "${loss}")
  endforeach()
endforeach()
# Every line but the timings: the sub-epoch points too.
foreach(run full split)
  file(READ "${WORK}/${run}/metrics.jsonl" text)
  string(REGEX REPLACE ",\"(seconds|samples_per_second)\":[^,}]*" "" text_${run} "${text}")
endforeach()
if(NOT text_full STREQUAL text_split)
  message(FATAL_ERROR "metrics.jsonl differs between the uninterrupted and the resumed run:\n${text_full}\n---\n${text_split}")
endif()
if(NOT text_full MATCHES "\"type\":\"step\"")
  message(FATAL_ERROR "metrics.jsonl has no sub-epoch (step) records:\n${text_full}")
endif()
list(LENGTH losses_full n)
if(NOT n EQUAL 2 OR NOT losses_full STREQUAL losses_split)
  message(FATAL_ERROR "train losses differ or are missing:\n full:  ${losses_full}\n split: ${losses_split}")
endif()

file(READ "${WORK}/split/curves.svg" svg)
if(NOT svg MATCHES "<svg" OR NOT svg MATCHES "<polyline")
  message(FATAL_ERROR "curves.svg is not a plot")
endif()

# Continuing with other options is refused with a message naming the option.
train(FALSE ${common} --out "${WORK}/split" --resume --lr 0.5)
if(last_rc EQUAL 0 OR NOT last_err MATCHES "lr = .*use the same options")
  message(FATAL_ERROR "a resume with another --lr must fail clearly:\n${last_out}\n${last_err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "resume is bit-exact: ${losses_full}")
