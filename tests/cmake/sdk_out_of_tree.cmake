# The SDK works out of tree: install the build into a temporary prefix, check the install
# holds the SDK package, libk3core, k3host and the plugins, configure and build the example
# plugin (sdk/examples/clock) against that prefix alone, check its exports, then let the
# INSTALLED k3host list it (K3_PLUGIN_PATH) and the plugin-host test load and drive it, and
# run the guide's last steps (a streamed run with the policy, k3host sim) from an empty folder.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "sdk: example plugin builds out of tree against the installed SDK, loads and runs the guide's last steps"
           COMMAND ${CMAKE_COMMAND}
             -DBUILD_DIR=${CMAKE_BINARY_DIR}
             -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
             -DWORK_DIR=${CMAKE_BINARY_DIR}/test-tmp/sdk-out-of-tree
             -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
             -DBINDIR=${CMAKE_INSTALL_BINDIR}
             -DINCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR}
             -DGENERATOR=${CMAKE_GENERATOR}
             -DCXX=${CMAKE_CXX_COMPILER}
             -DLOADER_TEST=$<TARGET_FILE:k3test-plugin_host>
             -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties("sdk: example plugin builds out of tree against the installed SDK, loads and runs the guide's last steps"
                       PROPERTIES TIMEOUT 600)
  return()
endif()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
  set(run_error "${err}" PARENT_SCOPE)
endfunction()

function(require_file path why)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "cmake --install did not install ${path} (${why})")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(example_build ${WORK_DIR}/clock-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. Install everything into the temporary prefix.
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

file(GLOB sdk_headers RELATIVE ${SOURCE_DIR}/sdk/k3 ${SOURCE_DIR}/sdk/k3/*.hpp)
foreach(h IN LISTS sdk_headers)
  require_file(${prefix}/${INCLUDEDIR}/k3sdk/k3/${h} "SDK header")
endforeach()
foreach(f k3sdkConfig.cmake k3sdkConfigVersion.cmake k3sdkTargets.cmake K3Plugin.cmake k3plugin.map)
  require_file(${prefix}/${LIBDIR}/cmake/k3sdk/${f} "SDK CMake package")
endforeach()
require_file(${prefix}/${LIBDIR}/libk3core.so "core library")
require_file(${prefix}/${BINDIR}/k3host "the executable")
file(GLOB built_plugins RELATIVE ${BUILD_DIR}/lib/k3host/plugins ${BUILD_DIR}/lib/k3host/plugins/k3-*.so)
if(NOT built_plugins)
  message(FATAL_ERROR "no plugins in ${BUILD_DIR}/lib/k3host/plugins: build first")
endif()
foreach(p IN LISTS built_plugins)
  require_file(${prefix}/${LIBDIR}/k3host/plugins/${p} "plugin")
endforeach()
# Test plugins are never installed.
file(GLOB leaked_fixtures ${prefix}/${LIBDIR}/k3host/plugins/k3-*-fx*.so)
if(leaked_fixtures)
  message(FATAL_ERROR "test fixture plugins were installed: ${leaked_fixtures}")
endif()

# 2. Configure and build the example against the prefix only.
run("configuring the example" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/sdk/examples/clock -B ${example_build}
    -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
file(STRINGS ${example_build}/CMakeCache.txt sdk_dir_line REGEX "^k3sdk_DIR:")
if(NOT sdk_dir_line MATCHES "=${prefix}/")
  message(FATAL_ERROR "the example found the SDK outside the temporary prefix: ${sdk_dir_line}")
endif()
run("building the example" ${CMAKE_COMMAND} --build ${example_build})
set(example_plugin ${example_build}/k3-cache-clock.so)
if(NOT EXISTS ${example_plugin})
  message(FATAL_ERROR "the example build did not produce ${example_plugin}")
endif()

# 3. The installed K3Plugin.cmake applied the version script.
run("export check of the example" ${CMAKE_COMMAND} -DPLUGIN_DIRS=${example_build}
    -DPARAMS_REQUIRED_DIRS=${example_build} -DMIN_PLUGINS=1 -P ${SOURCE_DIR}/tests/cmake/plugin_exports.cmake)

# 4. The installed k3host lists it, from the installed plugin folder and K3_PLUGIN_PATH.
run("k3host plugins" ${CMAKE_COMMAND} -E env K3_PLUGIN_PATH=${example_build} ${prefix}/${BINDIR}/k3host plugins)
string(REGEX MATCH "\n[ \t]*cache[ \t]+clock[ \t]+1\\.0\\.0[ \t]+[0-9]+[ \t]+[^\n]*k3-cache-clock\\.so" listed "${run_output}")
if(NOT listed)
  message(FATAL_ERROR "k3host plugins does not list the example as 'cache clock 1.0.0':\n${run_output}\n${run_error}")
endif()
if(NOT listed MATCHES "${example_plugin}")
  message(FATAL_ERROR "k3host plugins lists the clock policy from another file: ${listed}")
endif()
string(FIND "${run_output}" "${prefix}/${LIBDIR}/k3host/plugins" at)
if(at EQUAL -1)
  message(FATAL_ERROR "k3host plugins does not search the installed plugin folder:\n${run_output}")
endif()

# 5. The host creates the policy and drives it (tests/unit/plugin_host/out_of_tree_example.cpp).
run("loading the example" ${CMAKE_COMMAND} -E env K3_EXAMPLE_PLUGIN_DIR=${example_build}
    ${LOADER_TEST} "[out-of-tree]")
# 6. The guide's last steps with the installed k3host, from an empty folder: a streamed run
#    with the policy, then k3host sim on that run's trace (lib/clock_guide.cmake).
include(${SOURCE_DIR}/tests/cmake/lib/clock_guide.cmake)
k3_clock_guide(${prefix}/${BINDIR}/k3host ${example_build} ${WORK_DIR}/guide ${SOURCE_DIR})
message(STATUS "out-of-tree example: built against ${prefix}, listed, loaded and used")
