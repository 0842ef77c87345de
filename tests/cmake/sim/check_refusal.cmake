# cmake -DK3HOST=... -DBAD=<a file that is not a trace> -P check_refusal.cmake
execute_process(COMMAND ${K3HOST} sim ${BAD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2 for a file that is not a trace, got ${rc}:\n${err}")
endif()
if(NOT err MATCHES "not a k3host trace" OR NOT err MATCHES "sim.cmake")
  message(FATAL_ERROR "the error should name the file and say it is not a trace:\n${err}")
endif()
