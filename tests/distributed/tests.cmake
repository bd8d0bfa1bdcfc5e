# Multi-process tests over Gloo on the loopback: hg-run starts N copies of
# dist_worker, each checks its results against a serial reference it computes
# itself (tests/distributed/dist_worker.cpp); one failing rank fails the run.
add_executable(dist_worker ${CMAKE_CURRENT_LIST_DIR}/dist_worker.cpp)
target_link_libraries(dist_worker PRIVATE halfgrad)
hg_target_warnings(dist_worker)
hg_configure_cuda(dist_worker PRIVATE)

foreach(scenario collectives ddp no_sync unused amp_scaler)
  foreach(n 2 3)
    add_test(NAME dist_${scenario}_np${n}
             COMMAND $<TARGET_FILE:hg-run> -n ${n} $<TARGET_FILE:dist_worker> ${scenario})
    set_tests_properties(dist_${scenario}_np${n} PROPERTIES LABELS distributed TIMEOUT 60
                         ENVIRONMENT "HG_GLOO_IFNAME=lo")
  endforeach()
endforeach()
# A rank that dies: the others raise hg::Error within the 10 s timeout.
add_test(NAME dist_dead_peer_np3 COMMAND $<TARGET_FILE:hg-run> -n 3 $<TARGET_FILE:dist_worker> dead_peer)
set_tests_properties(dist_dead_peer_np3 PROPERTIES LABELS distributed TIMEOUT 30)
# hg-run stops every rank when one fails (rank 1 exits 3, rank 0 sleeps 60 s):
# it must exit with 3 within the timeout.
add_test(NAME hg_run_fails_all
         COMMAND ${CMAKE_COMMAND} -E env $<TARGET_FILE:hg-run> -n 2 --grace 1 $<TARGET_FILE:dist_worker> exit_early)
set_tests_properties(hg_run_fails_all PROPERTIES LABELS distributed TIMEOUT 15
                     PASS_REGULAR_EXPRESSION "hg-run: failed \\(rank 1, status 3\\)")
# One process: DDP and the cross-rank GradScaler over a fake stream-ordered
# group (no host sync on CUDA, asserted with the runtime's counters).
hg_add_test(test_distributed LABEL distributed SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ddp_device.cpp)
# World size 1 over NCCL on one GPU: gpu builds only; skipped (exit 77)
# without a GPU or without NCCL.
if(HG_CUDA_MODE STREQUAL "gpu")
  add_test(NAME dist_nccl_world1 COMMAND $<TARGET_FILE:hg-run> -n 1 $<TARGET_FILE:dist_worker> nccl1)
  set_tests_properties(dist_nccl_world1 PROPERTIES LABELS distributed TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()
