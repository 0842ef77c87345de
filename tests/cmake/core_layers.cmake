# The folders of core/src are layers (docs/architecture.md, "core/src, bottom to top"): a folder
# includes only from folders below it in the list, so no folder includes from one that
# includes it back. A new folder must be placed in the list (and in the doc) to pass.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "architecture: core/src folders include only from the layers below them"
           COMMAND ${CMAKE_COMMAND} -DK3_SOURCE_DIR=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

# Bottom to top.
set(layers util machine io config plugin_host chat model maths streaming engine job eval conversation sim synth serve bench doctor)

set(src ${K3_SOURCE_DIR}/core/src)
file(GLOB folders LIST_DIRECTORIES true RELATIVE ${src} ${src}/*)
set(errors "")
foreach(folder IN LISTS folders)
  if(NOT IS_DIRECTORY ${src}/${folder})
    continue()
  endif()
  list(FIND layers ${folder} rank)
  if(rank EQUAL -1)
    string(APPEND errors "core/src/${folder}: not in the layer list of tests/cmake/core_layers.cmake and docs/architecture.md\n")
    continue()
  endif()
  file(GLOB_RECURSE files RELATIVE ${src} ${src}/${folder}/*.hpp ${src}/${folder}/*.cpp)
  foreach(f IN LISTS files)
    file(STRINGS ${src}/${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([a-z_]+)/.*$" "\\1" target "${line}")
      if(target STREQUAL folder)
        continue()
      endif()
      list(FIND layers ${target} target_rank)
      if(target_rank EQUAL -1)
        string(APPEND errors "core/src/${f}: includes from '${target}/', which is not a layer of core/src\n")
      elseif(target_rank GREATER rank)
        string(APPEND errors "core/src/${f}: ${folder}/ includes from ${target}/, a layer above it\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "layering of core/src broken:\n${errors}")
endif()
list(JOIN layers " < " order)
message(STATUS "core/src layers ok: ${order}")
