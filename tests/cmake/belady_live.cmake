# Belady in a live run, end to end through the CLI (docs/cache.md "Belady in
# a live run"): record a run's trace with trace.out, run the same pipeline again with
# cache.policy=belady and cache.future=TRACE, and replay the trace with `k3host sim` at the
# run's slot count: the live LRU and belady hit counts must equal the simulator's exactly,
# belady must beat LRU, and a belady run without a future or with another prompt's trace
# must be refused with exit code 2 naming what is wrong.
if(NOT TARGET k3host)
  return()
endif()

add_test(NAME "belady-live: live hits equal k3host sim on the run's own trace"
         COMMAND ${CMAKE_COMMAND} -DK3HOST=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR}
                 -DOUT=${PROJECT_BINARY_DIR}/test-tmp/belady-live
                 -P ${CMAKE_CURRENT_LIST_DIR}/belady_live/check_live_vs_sim.cmake)
