# Export hygiene: every plugin library exports k3_plugin_descriptor, k3_plugin_create, the
# type_info of the SDK interfaces and, when it describes its parameters, k3_plugin_params
# (K3_PLUGIN_PARAMS / K3_PLUGIN_NO_PARAMS), and nothing else (no k3:: functions, no std::
# template code) — what sdk/cmake/k3plugin.map promises. Checks the real plugin folder,
# the well-formed fixture plugins and the in-tree build of the SDK example. The table is
# optional for a plugin, but every plugin k3host ships, and the example, must have one:
# those folders are also given as PARAMS_REQUIRED_DIRS.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P:
#   cmake -DPLUGIN_DIRS="dir1|dir2" [-DPARAMS_REQUIRED_DIRS="dir1|..."] [-DMIN_PLUGINS=n] -P plugin_exports.cmake
if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(dirs ${K3_PLUGIN_OUTPUT_DIR} ${CMAKE_BINARY_DIR}/test-plugins/good ${CMAKE_BINARY_DIR}/test-plugins/example-clock)
  string(REPLACE ";" "|" dirs "${dirs}")
  set(described ${K3_PLUGIN_OUTPUT_DIR} ${CMAKE_BINARY_DIR}/test-plugins/example-clock)
  string(REPLACE ";" "|" described "${described}")
  add_test(NAME "sdk: plugins export only the descriptor, the factory, the parameter table and SDK type_info"
           COMMAND ${CMAKE_COMMAND} "-DPLUGIN_DIRS=${dirs}" "-DPARAMS_REQUIRED_DIRS=${described}" -DMIN_PLUGINS=4
                   -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

find_program(NM nm)
if(NOT NM)
  message(FATAL_ERROR "nm (binutils) is needed to check plugin exports")
endif()
if(NOT DEFINED MIN_PLUGINS)
  set(MIN_PLUGINS 1)
endif()

string(REPLACE "|" ";" dirs "${PLUGIN_DIRS}")
string(REPLACE "|" ";" described_dirs "${PARAMS_REQUIRED_DIRS}")
set(checked 0)
set(with_params 0)
set(failures "")
foreach(dir IN LISTS dirs)
  file(GLOB libs ${dir}/k3-*.so)
  foreach(lib IN LISTS libs)
    execute_process(COMMAND ${NM} -D --defined-only --format=posix ${lib}
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      list(APPEND failures "${lib}: nm failed: ${err}")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    string(REPLACE "\n" ";" lines "${out}")
    set(has_descriptor FALSE)
    set(has_factory FALSE)
    set(has_params FALSE)
    foreach(line IN LISTS lines)
      if(line STREQUAL "")
        continue()
      endif()
      string(REGEX REPLACE " .*$" "" sym "${line}")
      if(sym STREQUAL "k3_plugin_descriptor")
        set(has_descriptor TRUE)
      elseif(sym STREQUAL "k3_plugin_create")
        set(has_factory TRUE)
      elseif(sym STREQUAL "k3_plugin_params")
        set(has_params TRUE)
      elseif(NOT sym MATCHES "^_ZT[IS]N2k33sdk")  # typeinfo / typeinfo name of k3::sdk::*
        execute_process(COMMAND c++filt ${sym} OUTPUT_VARIABLE pretty OUTPUT_STRIP_TRAILING_WHITESPACE)
        list(APPEND failures "${lib}: exports ${sym} (${pretty})")
      endif()
    endforeach()
    if(NOT has_descriptor OR NOT has_factory)
      list(APPEND failures "${lib}: does not export both k3_plugin_descriptor and k3_plugin_create")
    endif()
    list(FIND described_dirs "${dir}" must_describe)
    if(has_params)
      math(EXPR with_params "${with_params} + 1")
    elseif(NOT must_describe EQUAL -1)
      list(APPEND failures "${lib}: does not export k3_plugin_params (describe its parameters with "
                           "K3_PLUGIN_PARAMS, or K3_PLUGIN_NO_PARAMS when it takes none)")
    endif()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "plugin export check failed (build plugins with k3_add_plugin, which applies "
                      "sdk/cmake/k3plugin.map):\n  ${text}")
endif()
if(checked LESS MIN_PLUGINS)
  message(FATAL_ERROR "plugin export check: only ${checked} plugin libraries found in ${PLUGIN_DIRS} "
                      "(expected at least ${MIN_PLUGINS}); build first")
endif()
message(STATUS "plugin export check: ${checked} libraries export only their entry points (${with_params} with a "
               "parameter table) and SDK type_info")
