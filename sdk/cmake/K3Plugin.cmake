# k3_add_plugin(<target> KIND <storage|cache|kernels|tokenizer|transport> NAME <name> SOURCES ...)
# Builds a k3host plugin: a MODULE library named k3-<kind>-<name>.so with hidden
# visibility, exact floating point (-ffp-contract=off) and C++20, linked only to k3::sdk.
# A linker version script (k3plugin.map, next to this file) keeps every symbol local but
# k3_plugin_descriptor, k3_plugin_create, k3_plugin_params and the SDK interfaces' type_info.
# In the k3host tree it lands in the plugin directory next to libk3core; out of tree it
# lands in the build directory (point K3_PLUGIN_PATH or a pipeline's plugin_path at it).

# Remembered at include time: inside the function CMAKE_CURRENT_LIST_DIR is the caller's.
set_property(GLOBAL PROPERTY K3_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/k3plugin.map")

function(k3_add_plugin target)
  cmake_parse_arguments(P "" "KIND;NAME" "SOURCES" ${ARGN})
  if(NOT P_KIND OR NOT P_NAME OR NOT P_SOURCES)
    message(FATAL_ERROR "k3_add_plugin(${target}): KIND, NAME and SOURCES are required")
  endif()
  if(NOT P_KIND MATCHES "^(storage|cache|kernels|tokenizer|transport)$")
    message(FATAL_ERROR "k3_add_plugin(${target}): unknown KIND '${P_KIND}'")
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE k3::sdk)
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_compile_options(${target} PRIVATE -ffp-contract=off -fno-fast-math)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "k3-${P_KIND}-${P_NAME}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  get_property(version_script GLOBAL PROPERTY K3_PLUGIN_VERSION_SCRIPT)
  if(NOT APPLE AND NOT WIN32)
    target_link_options(${target} PRIVATE "LINKER:--version-script=${version_script}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${version_script})
  endif()
  if(DEFINED K3_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${K3_PLUGIN_OUTPUT_DIR})
    install(TARGETS ${target} LIBRARY DESTINATION ${K3_PLUGIN_INSTALL_DIR})
    if(COMMAND k3_project_flags)
      k3_project_flags(${target})
    endif()
    set_property(GLOBAL APPEND PROPERTY K3_PLUGIN_TARGETS ${target})
  endif()
endfunction()
