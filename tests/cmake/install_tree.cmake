# `cmake --install` makes a k3host that works from anywhere and can be moved: install the
# build into a temporary prefix, check that it holds the data folder (presets, the installed
# configs/default.yaml, the geometries, the relative data link) and the documentation, MOVE
# the prefix, then run the moved k3host from another folder (installed/check_installed.cmake:
# --list-presets, --config laptop, an unknown preset, the demo generated in the user's data
# folder). Finally the build tree's k3host still reads the source tree, never the install.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "install: an installed, then moved, k3host runs --config laptop from any folder"
           COMMAND ${CMAKE_COMMAND}
             -DBUILD_DIR=${CMAKE_BINARY_DIR}
             -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
             -DWORK=${CMAKE_BINARY_DIR}/test-tmp/install-tree
             -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
             -DDATADIR=${CMAKE_INSTALL_DATADIR}
             -DDOCDIR=${CMAKE_INSTALL_DOCDIR}
             -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties("install: an installed, then moved, k3host runs --config laptop from any folder"
                       PROPERTIES TIMEOUT 300)
  return()
endif()
cmake_policy(VERSION 3.20)  # a -P script starts with no policies: quoted if() arguments, IN_LIST

include(${CMAKE_CURRENT_LIST_DIR}/installed/check_installed.cmake)

function(require_file path why)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "cmake --install did not install ${path} (${why})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(first ${WORK}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${first}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install into ${first} failed (${rc}): ${err}")
endif()

# 1. What the install holds.
set(data ${first}/${DATADIR}/k3host)
file(GLOB presets RELATIVE ${SOURCE_DIR}/presets ${SOURCE_DIR}/presets/*.yaml)
foreach(f IN LISTS presets)
  require_file(${data}/presets/${f} "a preset")
endforeach()
file(GLOB geometries RELATIVE ${SOURCE_DIR}/configs/models ${SOURCE_DIR}/configs/models/*.yaml)
foreach(f IN LISTS geometries)
  require_file(${data}/configs/models/${f} "a geometry")
endforeach()
require_file(${data}/configs/default.yaml "the default pipeline")
file(GLOB shipped RELATIVE ${SOURCE_DIR}/data/models/fortune ${SOURCE_DIR}/data/models/fortune/*)
foreach(f IN LISTS shipped)
  require_file(${data}/data/models/fortune/${f} "a file of the shipped fortune model")
endforeach()
require_file(${data}/data/text/copyright-fortunes "the licence of the text the fortune model was trained on")
if(EXISTS ${data}/configs/test)
  message(FATAL_ERROR "the test fixtures of configs/test were installed")
endif()
# The installed default pipeline differs from the source one exactly in its two paths under
# models/ (the synthetic demo's folder and the run report).
file(STRINGS ${SOURCE_DIR}/configs/default.yaml source_lines REGEX "^[^#]")
file(STRINGS ${data}/configs/default.yaml installed_lines REGEX "^[^#]")
set(changed "")
foreach(line IN ZIP_LISTS source_lines installed_lines)
  if(NOT line_0 STREQUAL line_1)
    list(APPEND changed "${line_1}")
  endif()
endforeach()
set(user "\${XDG_DATA_HOME:-\${HOME}/.local/share}/k3host/models")
if(NOT changed STREQUAL "  demo_path: ${user}/demo;  report: ${user}/last-run.json")
  message(FATAL_ERROR "the installed configs/default.yaml should differ from the source one in model.demo_path and "
                      "job.report only, naming ${user}; it differs in: ${changed}")
endif()
# The data link is relative, so the prefix can move.
set(link ${first}/${LIBDIR}/k3host/data)
if(NOT IS_SYMLINK ${link})
  message(FATAL_ERROR "${link} is not a link to the data folder")
endif()
file(READ_SYMLINK ${link} target)
if(IS_ABSOLUTE "${target}")
  message(FATAL_ERROR "${link} -> ${target}: an absolute link, so a moved prefix would lose its data")
endif()
# Documentation: the SDK example and the README of every plugin that was built.
require_file(${first}/${DOCDIR}/examples/clock/CMakeLists.txt "the SDK example")
require_file(${first}/${DOCDIR}/README.md "the README")
file(GLOB built_plugins ${BUILD_DIR}/lib/k3host/plugins/k3-*.so)
foreach(p IN LISTS built_plugins)
  get_filename_component(name ${p} NAME_WE)
  string(REGEX REPLACE "^k3-[a-z]+-" "" name "${name}")
  file(GLOB readme ${first}/${DOCDIR}/plugins/*/${name}/README.md)
  if(NOT readme)
    message(FATAL_ERROR "no README installed for the plugin ${p} (looked for ${first}/${DOCDIR}/plugins/*/${name})")
  endif()
endforeach()

# 2. Move the prefix: nothing of the install may name where it was installed.
set(prefix ${WORK}/moved)
file(RENAME ${first} ${prefix})
k3_check_installed(${prefix} ${prefix}/${DATADIR}/k3host ${WORK})

# 3. The build tree reads the source tree's presets and names the repository's shipped model
# and models/demo, from any folder; the install's marker preset is unknown to it.
set(K3I_EXE ${BUILD_DIR}/bin/k3host)
set(K3I_ELSEWHERE ${WORK}/elsewhere)
set(K3I_HOME ${WORK}/home)
k3_installed_run(code out err ARGS --config laptop --print-config)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "the build tree's --config laptop failed\n${last_shown}")
endif()
k3_require_in("${out}" "${SOURCE_DIR}/presets/laptop.yaml:")
k3_require_in("${out}" "  path: ${SOURCE_DIR}/data/models/fortune  # ${SOURCE_DIR}/configs/default.yaml:")
k3_require_in("${out}" "demo_path: ${SOURCE_DIR}/models/demo  # ${SOURCE_DIR}/configs/default.yaml:")
file(WRITE ${prefix}/${DATADIR}/k3host/presets/installcheck.yaml "extends: ../configs/default.yaml\n")
k3_installed_run(code out err ARGS --config installcheck --print-config)
if(NOT code EQUAL 2)
  message(FATAL_ERROR "the build tree found a preset that only the install has\n${last_shown}")
endif()
k3_require_in("${err}" "${SOURCE_DIR}/presets/installcheck.yaml")
file(REMOVE_RECURSE ${WORK})
