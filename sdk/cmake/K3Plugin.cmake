# k3_add_plugin(<target> KIND <storage|cache|kernels|tokenizer> NAME <name> SOURCES ...)
# Builds a k3host plugin: a MODULE library named k3-<kind>-<name>.so with hidden
# visibility, exact floating point (-ffp-contract=off) and C++20, linked only to k3::sdk.
# In the k3host tree it lands in the plugin directory next to libk3core; out of tree it
# lands in the build directory (point K3_PLUGIN_PATH or a pipeline's plugin_path at it).
function(k3_add_plugin target)
  cmake_parse_arguments(P "" "KIND;NAME" "SOURCES" ${ARGN})
  if(NOT P_KIND OR NOT P_NAME OR NOT P_SOURCES)
    message(FATAL_ERROR "k3_add_plugin(${target}): KIND, NAME and SOURCES are required")
  endif()
  if(NOT P_KIND MATCHES "^(storage|cache|kernels|tokenizer)$")
    message(FATAL_ERROR "k3_add_plugin(${target}): unknown KIND '${P_KIND}'")
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE k3::sdk)
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_compile_options(${target} PRIVATE -ffp-contract=off -fno-fast-math)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "k3-${P_KIND}-${P_NAME}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(DEFINED K3_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${K3_PLUGIN_OUTPUT_DIR})
    install(TARGETS ${target} LIBRARY DESTINATION ${K3_PLUGIN_INSTALL_DIR})
    if(COMMAND k3_project_flags)
      k3_project_flags(${target})
    endif()
    set_property(GLOBAL APPEND PROPERTY K3_PLUGIN_TARGETS ${target})
  endif()
endfunction()
