# The folders of core/src are layers, and every public header of core/include/k3 belongs to
# one (docs/architecture.md, "Layering rule"): tools/check-layers.py checks that a folder
# includes only from the layers below it, by folder or through a public header, and that
# docs/architecture.md's edge table is the code's.
# The second test copies core/src, core/include/k3 and the doc into a scratch tree, plants
# one violation of each kind and requires the checker to name each one (exit 1), so the
# first cannot pass by reading nothing.
# Included by tests/CMakeLists.txt (registers the tests); the second runs with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "architecture: core/src folders include only from the layers below them, public headers too"
           COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tools/check-layers.py ${PROJECT_SOURCE_DIR})
  add_test(NAME "architecture: check-layers names an include upwards of every kind and a stale doc table"
           COMMAND ${CMAKE_COMMAND} -DK3_SOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/core-layers -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(COPY ${K3_SOURCE_DIR}/core/src DESTINATION ${WORK}/core)
file(COPY ${K3_SOURCE_DIR}/core/include DESTINATION ${WORK}/core)
file(COPY ${K3_SOURCE_DIR}/docs/architecture.md DESTINATION ${WORK}/docs)

# The untouched copy passes: what follows fails because of what it plants.
execute_process(COMMAND /usr/bin/python3 ${K3_SOURCE_DIR}/tools/check-layers.py ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check-layers fails on an untouched copy (exit ${rc}):\n${out}${err}")
endif()

# A folder include upwards, a public-header include upwards, one reached only through the
# headers a public header includes, a public header including one of a layer above it.
file(WRITE ${WORK}/core/src/maths/planted_folder.hpp "#pragma once\n#include \"streaming/expert_cache.hpp\"\n")
file(WRITE ${WORK}/core/src/io/planted_header.cpp "#include <k3/geometry.hpp>\n")
file(WRITE ${WORK}/core/src/model/planted_through.cpp "#include <k3/job.hpp>\n")
file(APPEND ${WORK}/core/include/k3/checkpoint.hpp "#include <k3/plan.hpp>\n")
execute_process(COMMAND /usr/bin/python3 ${K3_SOURCE_DIR}/tools/check-layers.py ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "check-layers exited ${rc}, not 1, on planted includes:\n${all}")
endif()
foreach(expected
    "core/src/maths/planted_folder.hpp: maths/ includes \"streaming/...\", of streaming/, a layer above it"
    "core/src/io/planted_header.cpp: io/ includes k3/geometry.hpp, of model/, a layer above it"
    "core/src/model/planted_through.cpp: model/ includes k3/job.hpp (through k3/model.hpp), of engine/"
    "core/include/k3/checkpoint.hpp: a header of io/ includes k3/plan.hpp, a header of plan/")
  string(FIND "${all}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check-layers did not name: ${expected}\nIt said:\n${all}")
  endif()
endforeach()

# A folder and a public header with no layer.
file(REMOVE ${WORK}/core/src/maths/planted_folder.hpp ${WORK}/core/src/io/planted_header.cpp
     ${WORK}/core/src/model/planted_through.cpp)
file(COPY ${K3_SOURCE_DIR}/core/include/k3/checkpoint.hpp DESTINATION ${WORK}/core/include/k3)
file(WRITE ${WORK}/core/src/newfolder/a.cpp "// planted\n")
file(WRITE ${WORK}/core/include/k3/planted.hpp "#pragma once\n")
execute_process(COMMAND /usr/bin/python3 ${K3_SOURCE_DIR}/tools/check-layers.py ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
foreach(expected "core/src/newfolder: not a layer" "core/include/k3/planted.hpp: has no layer")
  string(FIND "${all}" "${expected}" at)
  if(NOT rc EQUAL 1 OR at EQUAL -1)
    message(FATAL_ERROR "check-layers (exit ${rc}) did not name: ${expected}\nIt said:\n${all}")
  endif()
endforeach()

# An edge the code has that the doc's table lacks.
file(REMOVE_RECURSE ${WORK}/core/src/newfolder)
file(REMOVE ${WORK}/core/include/k3/planted.hpp)
file(WRITE ${WORK}/core/src/chat/planted_edge.cpp "#include <k3/machine.hpp>\n")
execute_process(COMMAND /usr/bin/python3 ${K3_SOURCE_DIR}/tools/check-layers.py ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
string(FIND "${all}" "docs/architecture.md: the layer table is not the code's" at)
if(NOT rc EQUAL 1 OR at EQUAL -1)
  message(FATAL_ERROR "check-layers (exit ${rc}) did not find the doc's table stale:\n${all}")
endif()
message(STATUS "check-layers names every planted violation")
