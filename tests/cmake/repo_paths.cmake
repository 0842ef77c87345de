# Every path a comment or a doc names exists, and every section a citation quotes
# (docs/cache.md, "The evaluation") is a heading of that doc: tools/check-paths.py over the
# source tree.
# The second test plants one stale reference of each kind in a small tree and requires the
# checker to name each one (exit 1), so the first cannot pass by reading nothing.
# Included by tests/CMakeLists.txt (registers the tests); the second runs with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "docs: every path and section the comments and docs name exists"
           COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tools/check-paths.py ${PROJECT_SOURCE_DIR})
  add_test(NAME "docs: check-paths names a stale path, file and section of every kind"
           COMMAND ${CMAKE_COMMAND} -DK3_SOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/repo-paths -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/docs/architecture.md "# Architecture\n\n## Layers\n\n**Run-in heading** text.\n")
file(WRITE ${WORK}/core/src/streaming/real.hpp "#pragma once\n")
file(WRITE ${WORK}/core/src/streaming/user.cpp
     "// Fine: core/src/streaming/real.hpp, streaming/real.hpp, real.hpp, docs/architecture.md,\n"
     "// docs/architecture.md, \"Layers\"; docs/architecture.md \"Run-in heading\"; core/src/NAME/x.hpp.\n"
     "// Stale: core/src/cache/serve_batch.hpp and runtime/row_chunks.hpp and gone.cmake,\n"
     "// (docs/architecture.md,\n"
     "// \"Folders of core/src\").\n"
     "int x = 0;  // a trailing comment: core/src/model/gone.hpp\n"
     "const char* s = \"core/src/model/in_code.hpp\";  // code is not read, only comments\n")
execute_process(COMMAND /usr/bin/python3 ${K3_SOURCE_DIR}/tools/check-paths.py ${WORK}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "check-paths on the planted tree: exit ${code}\n${out}${err}")
if(NOT code EQUAL 1)
  message(FATAL_ERROR "expected exit 1, got ${code}")
endif()
foreach(want
    "core/src/streaming/user.cpp:3: core/src/cache/serve_batch.hpp does not exist"
    "core/src/streaming/user.cpp:3: runtime/row_chunks.hpp is under none of the folders"
    "core/src/streaming/user.cpp:3: no file of the repository is called gone.cmake"
    "core/src/streaming/user.cpp:4: docs/architecture.md has no section \"Folders of core/src\""
    "core/src/streaming/user.cpp:6: core/src/model/gone.hpp does not exist")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check-paths did not report: ${want}")
  endif()
endforeach()
string(REGEX MATCHALL "\n" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 5)
  message(FATAL_ERROR "expected exactly 5 stale references, got ${n}")
endif()
