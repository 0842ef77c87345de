# RUNPATH hygiene: no binary we build or install finds libraries through the current
# directory or through the absolute path of the build tree. Every RUNPATH (or RPATH) element
# of every ELF file in the build tree's bin/ and lib/, and of an install into a fresh prefix,
# must start with $ORIGIN; an empty element (which means the current directory) fails.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P:
#   cmake -DBUILD_DIR=build -DWORK=dir -P runpath.cmake
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "install: every RUNPATH element is $ORIGIN-relative, in the build tree and installed"
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DWORK=${CMAKE_BINARY_DIR}/test-tmp/runpath
                   -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

find_program(READELF readelf)
if(NOT READELF)
  message(FATAL_ERROR "readelf (binutils) is needed to read RUNPATH")
endif()

file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install into ${WORK}/prefix failed: ${err}")
endif()

set(failures "")
set(with_runpath 0)
set(installed_k3host FALSE)
file(GLOB_RECURSE candidates ${BUILD_DIR}/bin/* ${BUILD_DIR}/lib/*.so ${WORK}/prefix/bin/* ${WORK}/prefix/lib/*.so)
foreach(f IN LISTS candidates)
  execute_process(COMMAND ${READELF} -d ${f} OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    continue()  # not an ELF file (a script, a data file)
  endif()
  if(f STREQUAL "${WORK}/prefix/bin/k3host")
    set(installed_k3host TRUE)
  endif()
  # k3bench-ggml (tools/bench/CMakeLists.txt) exists only where K3_GGML_DIR names an
  # out-of-tree ggml install, and finds it there by its absolute path on purpose; it is in
  # no default build and never installed.
  if(f STREQUAL "${BUILD_DIR}/bin/k3bench-ggml")
    continue()
  endif()
  string(REGEX MATCHALL "\\((RUNPATH|RPATH)\\)[^\n]*\\[[^]\n]*\\]" entries "${out}")
  foreach(entry IN LISTS entries)
    math(EXPR with_runpath "${with_runpath} + 1")
    string(REGEX REPLACE "^.*\\[([^]]*)\\]$" "\\1" value "${entry}")
    # Split on ':' keeping empty elements (a CMake list drops none either: ";;" stays).
    string(REPLACE ":" ";" parts "${value}")
    if(value MATCHES "^:|:$|::" OR value STREQUAL "")
      list(APPEND failures "${f}: RUNPATH '${value}' has an empty element (the current directory)")
      continue()
    endif()
    foreach(part IN LISTS parts)
      if(NOT part MATCHES "^\\$ORIGIN(/|$)")
        list(APPEND failures "${f}: RUNPATH element '${part}' is not relative to $ORIGIN")
      endif()
    endforeach()
  endforeach()
endforeach()

if(NOT installed_k3host)
  list(APPEND failures "the install into ${WORK}/prefix has no bin/k3host")
endif()
if(with_runpath EQUAL 0)
  list(APPEND failures "no binary with a RUNPATH was found: nothing was checked")
endif()
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "${text}")
endif()
# The installed k3host runs from another directory and finds its library by $ORIGIN.
execute_process(COMMAND ${WORK}/prefix/bin/k3host --help WORKING_DIRECTORY ${WORK}
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed k3host does not run (exit ${rc}): ${err}")
endif()
message(STATUS "${with_runpath} RUNPATH entries checked, all relative to $ORIGIN")
