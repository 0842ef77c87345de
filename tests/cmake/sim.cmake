# k3host sim end to end: generate a skewed, reusing trace, replay it through every
# cache plugin on the search path at several capacities (slots, GB and working-set
# multiples), and check the property that must hold whatever the policies do: Belady's hit
# rate is >= every other policy's at every capacity. Also checks the CSV/JSON/SVG outputs
# exist, and that a file that is not a trace is refused with exit code 2 naming the file.
if(NOT TARGET k3host)
  return()
endif()

set(_k3_sim_dir ${PROJECT_BINARY_DIR}/test-tmp/sim-cli)

add_test(NAME "sim: scratch folder" COMMAND ${CMAKE_COMMAND} -E make_directory ${_k3_sim_dir})
set_tests_properties("sim: scratch folder" PROPERTIES FIXTURES_SETUP k3_sim_dir)

add_test(NAME "sim: generate a trace"
         COMMAND $<TARGET_FILE:k3host> sim --generate-trace ${_k3_sim_dir}/study.k3trace
                 --layers 12 --experts 64 --top-k 4 --tokens 80 --zipf 0.9 --reuse 0.3 --seed 5)
set_tests_properties("sim: generate a trace" PROPERTIES FIXTURES_REQUIRED k3_sim_dir FIXTURES_SETUP k3_sim_trace)

add_test(NAME "sim: belady is the ceiling at every capacity"
         COMMAND ${CMAKE_COMMAND} -DK3HOST=$<TARGET_FILE:k3host> -DTRACE=${_k3_sim_dir}/study.k3trace
                 -DOUT=${_k3_sim_dir} -P ${CMAKE_CURRENT_LIST_DIR}/sim/check_belady_ceiling.cmake)
set_tests_properties("sim: belady is the ceiling at every capacity" PROPERTIES FIXTURES_REQUIRED k3_sim_trace)

add_test(NAME "sim: a file that is not a trace is refused"
         COMMAND ${CMAKE_COMMAND} -DK3HOST=$<TARGET_FILE:k3host> -DBAD=${CMAKE_CURRENT_LIST_FILE}
                 -P ${CMAKE_CURRENT_LIST_DIR}/sim/check_refusal.cmake)
