# Every C++ file of the project matches .clang-format (tools/format.sh --check, clang-format 14).
# The second test runs the checker on a scratch tree holding one formatted file and one that
# is not, and requires exit 1 naming only the second, so the first cannot pass by reading
# nothing; then tools/format.sh formats the tree and the check passes.
# Included by tests/CMakeLists.txt (registers the tests); the second runs with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "format: every C++ file of ours matches .clang-format"
           COMMAND ${PROJECT_SOURCE_DIR}/tools/format.sh --check)
  add_test(NAME "format: the check names a file that differs from .clang-format, and only it"
           COMMAND ${CMAKE_COMMAND} -DK3_SOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/code-format -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

# A tree of its own (no git: format.sh then finds the files itself), the real script and style.
file(REMOVE_RECURSE ${WORK})
file(COPY ${K3_SOURCE_DIR}/.clang-format DESTINATION ${WORK})
file(COPY ${K3_SOURCE_DIR}/tools/format.sh DESTINATION ${WORK}/tools)
file(MAKE_DIRECTORY ${WORK}/sdk ${WORK}/plugins ${WORK}/tests)
file(WRITE ${WORK}/core/src/util/formatted.cpp "int twice(int x) { return 2 * x; }\n")
file(WRITE ${WORK}/plugins/unformatted.hpp "int  thrice( int x ){return 3*x;}\n")
execute_process(COMMAND ${WORK}/tools/format.sh --check RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "format.sh --check exited ${rc}, not 1, on a misformatted file:\n${all}")
endif()
if(NOT all MATCHES "plugins/unformatted.hpp: 1 lines" OR all MATCHES "util/formatted.cpp:")
  message(FATAL_ERROR "format.sh --check did not name exactly the misformatted file:\n${all}")
endif()
if(NOT all MATCHES "1 of 2 files not formatted")
  message(FATAL_ERROR "format.sh --check did not count the two files:\n${all}")
endif()
execute_process(COMMAND ${WORK}/tools/format.sh RESULT_VARIABLE rc OUTPUT_QUIET)
execute_process(COMMAND ${WORK}/tools/format.sh --check RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "format.sh --check still fails after formatting (exit ${rc}):\n${out}${err}")
endif()
