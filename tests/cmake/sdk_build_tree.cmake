# The SDK also works from a BUILD tree, without an install: the build exports the k3::sdk
# target into <build>/lib/cmake/k3sdk (sdk/CMakeLists.txt). Configure the example plugin
# (sdk/examples/clock) with -Dk3sdk_DIR pointing there and nothing else, check that the SDK
# came from there with the source tree's headers, build it, check its exports, and let the
# build tree's k3host list it through K3_PLUGIN_PATH and run the guide's last steps with it.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "sdk: example plugin builds out of tree against the build tree's SDK, is listed and runs the guide's last steps"
           COMMAND ${CMAKE_COMMAND}
             -DBUILD_DIR=${CMAKE_BINARY_DIR}
             -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
             -DWORK_DIR=${CMAKE_BINARY_DIR}/test-tmp/sdk-build-tree
             -DGENERATOR=${CMAKE_GENERATOR}
             -DCXX=${CMAKE_CXX_COMPILER}
             -DK3HOST=$<TARGET_FILE:k3host>
             -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties("sdk: example plugin builds out of tree against the build tree's SDK, is listed and runs the guide's last steps"
                       PROPERTIES TIMEOUT 600)
  return()
endif()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(package ${BUILD_DIR}/lib/cmake/k3sdk)
set(example_build ${WORK_DIR}/clock-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
foreach(f k3sdkConfig.cmake k3sdkConfigVersion.cmake k3sdkTargets.cmake K3Plugin.cmake k3plugin.map)
  if(NOT EXISTS ${package}/${f})
    message(FATAL_ERROR "the build tree has no ${package}/${f}")
  endif()
endforeach()

# 1. Configure against the build tree only (no prefix path, no package registry).
run("configuring the example" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/sdk/examples/clock -B ${example_build}
    -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    -Dk3sdk_DIR=${package} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
file(STRINGS ${example_build}/CMakeCache.txt sdk_dir_line REGEX "^k3sdk_DIR:")
if(NOT sdk_dir_line MATCHES "^k3sdk_DIR:[A-Z]+=(.*)$" OR NOT CMAKE_MATCH_1 STREQUAL package)
  message(FATAL_ERROR "the example did not take the SDK from the build tree: ${sdk_dir_line}")
endif()
# The build tree's k3::sdk carries the source tree's sdk/ as its include folder.
file(READ ${package}/k3sdkTargets.cmake targets)
string(FIND "${targets}" "INTERFACE_INCLUDE_DIRECTORIES \"${SOURCE_DIR}/sdk\"" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the build tree's k3::sdk does not include ${SOURCE_DIR}/sdk:\n${targets}")
endif()

# 2. Build, and check the version script was applied (the package's copy of k3plugin.map).
run("building the example" ${CMAKE_COMMAND} --build ${example_build})
set(example_plugin ${example_build}/k3-cache-clock.so)
if(NOT EXISTS ${example_plugin})
  message(FATAL_ERROR "the example build did not produce ${example_plugin}")
endif()
run("export check of the example" ${CMAKE_COMMAND} -DPLUGIN_DIRS=${example_build} -DMIN_PLUGINS=1
    -P ${SOURCE_DIR}/tests/cmake/plugin_exports.cmake)

# 3. The build tree's k3host lists it from that file.
run("k3host plugins" ${CMAKE_COMMAND} -E env K3_PLUGIN_PATH=${example_build} ${K3HOST} plugins)
string(REGEX MATCH "\n[ \t]*cache[ \t]+clock[ \t]+1\\.0\\.0[ \t]+[0-9]+[ \t]+[^\n]*k3-cache-clock\\.so" listed "${run_output}")
if(NOT listed OR NOT listed MATCHES "${example_build}/k3-cache-clock\\.so")
  message(FATAL_ERROR "k3host plugins does not list the example from ${example_plugin}:\n${run_output}")
endif()
# 4. The guide's last steps with the build's k3host, from an empty folder (lib/clock_guide.cmake).
include(${SOURCE_DIR}/tests/cmake/lib/clock_guide.cmake)
k3_clock_guide(${K3HOST} ${example_build} ${WORK_DIR}/guide ${SOURCE_DIR})
message(STATUS "out-of-tree example: built against the build tree's SDK (${package}), listed and used")
file(REMOVE_RECURSE ${WORK_DIR})
