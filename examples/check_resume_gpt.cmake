# ctest script: hg-train --model gpt stopped twice (--max-steps 7, between
# evaluations; --max-steps 20, at an evaluation) and resumed must end with a
# checkpoint byte-identical to an uninterrupted run's, the same metrics.jsonl
# (train-loss points and evaluations, timings aside) and the same generated
# sample. Also: the outputs exist, the loss falls, a resume with another
# option or as another model is refused clearly.
#   cmake -DHG_TRAIN=<hg-train> -DDEVICE=<cpu|cuda> -DTEXT=<a text file> -DWORK=<dir> [-DPRECISION=...] -P check_resume_gpt.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
if(NOT DEFINED PRECISION)
  set(PRECISION fp32)
endif()
# A tiny GPT on one text file: 30 iterations, an evaluation every 10.
set(common --model gpt --data "${TEXT}" --device ${DEVICE} --precision ${PRECISION} --n-layer 1 --n-head 2
           --n-embd 16 --block-size 16 --batch-size 4 --iters 30 --eval-every 10 --eval-batches 2
           --warmup-steps 5 --log-every 3 --sample-tokens 40 --lr 0.01)

include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")

train(TRUE ${common} --out "${WORK}/full")
train(TRUE ${common} --out "${WORK}/split" --max-steps 7)
if(NOT last_out MATCHES "stopped after step 7")
  message(FATAL_ERROR "expected a stop at step 7:\n${last_out}")
endif()
train(TRUE ${common} --out "${WORK}/split" --resume --max-steps 20)
if(NOT last_out MATCHES "resuming from .* at step 7")
  message(FATAL_ERROR "expected a resume at step 7:\n${last_out}")
endif()
train(TRUE ${common} --out "${WORK}/split" --resume)

require_same_checkpoints()
foreach(run full split)
  file(READ "${WORK}/${run}/metrics.jsonl" text)
  string(REGEX REPLACE ",\"(seconds|tokens_per_second)\":[^,}]*" "" text_${run} "${text}")
  file(READ "${WORK}/${run}/sample.txt" sample_${run})
endforeach()
if(NOT text_full STREQUAL text_split)
  message(FATAL_ERROR "metrics.jsonl differs between the uninterrupted and the resumed run:\n${text_full}\n---\n${text_split}")
endif()
if(NOT sample_full STREQUAL sample_split)
  message(FATAL_ERROR "the samples differ:\n${sample_full}\n---\n${sample_split}")
endif()
string(LENGTH "${sample_full}" sample_length)
if(sample_length LESS 40)  # 40 tokens of one byte each
  message(FATAL_ERROR "sample.txt holds ${sample_length} bytes, expected 40")
endif()

# Three evaluations with finite losses; the validation loss falls from the first to the last.
string(REGEX MATCHALL "\"val_loss\":[-0-9.eE+]+" val_losses "${text_full}")
list(LENGTH val_losses n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 evaluations in metrics.jsonl:\n${text_full}")
endif()
list(GET val_losses 0 first)
list(GET val_losses 2 last)
string(REPLACE "\"val_loss\":" "" first "${first}")
string(REPLACE "\"val_loss\":" "" last "${last}")
if(NOT first GREATER last)  # if() compares numbers as doubles
  message(FATAL_ERROR "the validation loss did not fall: ${first} -> ${last}")
endif()
if(NOT text_full MATCHES "\"type\":\"step\"")
  message(FATAL_ERROR "metrics.jsonl has no train-loss (step) records:\n${text_full}")
endif()
file(READ "${WORK}/split/curves.svg" svg)
if(NOT svg MATCHES "<polyline" OR NOT svg MATCHES ">step</text>")
  message(FATAL_ERROR "curves.svg is not a plot against the step")
endif()

# Continuing with other options, or as the Fashion-MNIST job, is refused with a clear message.
train(FALSE ${common} --out "${WORK}/split" --resume --dropout 0.25)
if(last_rc EQUAL 0 OR NOT last_err MATCHES "--dropout = 0, this run has 0.25; use the same options")
  message(FATAL_ERROR "a resume with another --dropout must fail clearly:\n${last_out}\n${last_err}")
endif()
train(FALSE --model mlp --device ${DEVICE} --out "${WORK}/split" --resume)
if(last_rc EQUAL 0 OR NOT last_err MATCHES "model = gpt")
  message(FATAL_ERROR "resuming a gpt checkpoint as --model mlp must fail clearly:\n${last_out}\n${last_err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "gpt resume is bit-exact; validation loss ${first} -> ${last}")
