# k3_check_installed(PREFIX DATA WORK): runs an installed k3host (PREFIX/bin/k3host, its data
# folder DATA = PREFIX/share/k3host) the way a
# user would, from an empty folder outside both trees, with HOME (and XDG_DATA_HOME) inside
# WORK, and checks that it takes everything from PREFIX:
#   - --list-presets lists the presets of DATA/presets, including a marker
#     preset this function adds there (no source tree has it);
#   - --config laptop resolves to DATA/presets/laptop.yaml, its model is the shipped
#     DATA/data/models/fortune, and the demo location is $XDG_DATA_HOME/k3host/models/demo,
#     else ~/.local/share/k3host/models/demo;
#   - --config laptop runs the shipped model and prints its continuation;
#   - an unknown preset name is exit 2 naming the file it looked for and the presets there;
#   - a -m demo run generates the demo checkpoint in that user folder (from a marker geometry
#     this function adds to DATA/configs/models: only the installed data has it)
#     and runs; nothing is written under PREFIX.
# The markers are removed again before returning. Used by install_tree.cmake and
# deb_package.cmake (cmake -P scripts).

function(k3_installed_run out_code out_stdout out_stderr)
  cmake_parse_arguments(R "" "XDG" "ARGS" ${ARGN})
  set(env --unset=XDG_DATA_HOME --unset=K3_MODELS_DIR --unset=K3_PLUGIN_PATH "HOME=${K3I_HOME}")
  if(R_XDG)
    list(APPEND env "XDG_DATA_HOME=${R_XDG}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} ${K3I_EXE} ${R_ARGS}
                  WORKING_DIRECTORY ${K3I_ELSEWHERE}
                  RESULT_VARIABLE code OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${out_code} "${code}" PARENT_SCOPE)
  set(${out_stdout} "${o}" PARENT_SCOPE)
  set(${out_stderr} "${e}" PARENT_SCOPE)
  string(REPLACE ";" " " shown "${R_ARGS}")
  string(CONCAT shown "(in ${K3I_ELSEWHERE}, HOME=${K3I_HOME}, XDG_DATA_HOME=${R_XDG})\n${K3I_EXE} ${shown}\n"
                "--- exit code: ${code}\n--- stdout:\n${o}\n--- stderr:\n${e}")
  set(last_shown "${shown}" PARENT_SCOPE)
endfunction()

function(k3_require_in text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in the output\n${last_shown}")
  endif()
endfunction()

function(k3_check_installed prefix data work)
  set(K3I_EXE ${prefix}/bin/k3host)
  set(K3I_ELSEWHERE ${work}/elsewhere)
  set(K3I_HOME ${work}/home)
  set(xdg ${work}/xdg)
  file(REMOVE_RECURSE ${K3I_ELSEWHERE} ${K3I_HOME} ${xdg})
  file(MAKE_DIRECTORY ${K3I_ELSEWHERE} ${K3I_HOME})
  if(NOT EXISTS ${K3I_EXE})
    message(FATAL_ERROR "no installed k3host at ${K3I_EXE}")
  endif()

  # The markers: a preset and a geometry that exist only in this installed data folder.
  set(marker_preset ${data}/presets/installcheck.yaml)
  set(marker_geometry ${data}/configs/models/installcheck-tiny.yaml)
  file(WRITE ${marker_preset} "description: \"marker preset of the install test\"\nextends: ../configs/default.yaml\n"
                              "memory:\n  trunk_gb: 3\n  expert_cache_gb: 1\n")
  configure_file(${data}/configs/models/tiny.yaml ${marker_geometry} COPYONLY)

  # --list-presets: every installed preset, the marker too.
  k3_installed_run(code out err ARGS --list-presets)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "--list-presets failed\n${last_shown}")
  endif()
  file(GLOB presets RELATIVE ${data}/presets ${data}/presets/*.yaml)
  list(LENGTH presets n_presets)
  if(n_presets LESS 2)
    message(FATAL_ERROR "the install holds ${n_presets} presets in ${data}/presets")
  endif()
  foreach(p IN LISTS presets)
    string(REGEX REPLACE "\\.yaml$" "" name "${p}")
    if(NOT out MATCHES "(^|\n)${name} ")
      message(FATAL_ERROR "--list-presets does not list the installed preset '${name}'\n${last_shown}")
    endif()
  endforeach()

  # --config NAME: the installed preset, the demo location in the user's data folder.
  foreach(where xdg home)
    if(where STREQUAL "xdg")
      set(demo ${xdg}/k3host/models/demo)
      set(xdg_arg XDG ${xdg})
    else()
      set(demo ${K3I_HOME}/.local/share/k3host/models/demo)
      set(xdg_arg "")
    endif()
    k3_installed_run(code out err ${xdg_arg} ARGS --config laptop --print-config)
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "--config laptop --print-config failed\n${last_shown}")
    endif()
    k3_require_in("${out}" "${data}/presets/laptop.yaml:")
    k3_require_in("${out}" "  path: ${data}/data/models/fortune  # ${data}/configs/default.yaml:")
    k3_require_in("${out}" "demo_path: ${demo}  # ${data}/configs/default.yaml:")
  endforeach()

  # The main command on the shipped model: it runs from the install and prints text.
  k3_installed_run(code out err ARGS --config laptop --set threads=1 -n 4)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "the installed --config laptop run failed\n${last_shown}")
  endif()
  k3_require_in("${out}" "generated 4 tokens")
  k3_require_in("${err}" "loading ${data}/data/models/fortune")

  # An unknown name: exit 2, naming where it looked and what is there.
  k3_installed_run(code out err ARGS --config no-such-preset --print-config)
  if(NOT code EQUAL 2)
    message(FATAL_ERROR "an unknown preset name: expected exit 2\n${last_shown}")
  endif()
  k3_require_in("${err}" "${data}/presets/no-such-preset.yaml")
  k3_require_in("${err}" "laptop")

  # A -m demo run from the marker preset and geometry: generated in the user's folder, and
  # it runs.
  set(tiny_run -m demo --set model.geometry=installcheck-tiny --set threads=1 --set memory.context=64
               --set job.max_new_tokens=2 --set job.stop_at_eos=false --quiet)
  foreach(where xdg home)
    if(where STREQUAL "xdg")
      set(models ${xdg}/k3host/models)
      set(xdg_arg XDG ${xdg})
    else()
      set(models ${K3I_HOME}/.local/share/k3host/models)
      set(xdg_arg "")
    endif()
    k3_installed_run(code out err ${xdg_arg} ARGS --config installcheck ${tiny_run})
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "the installed demo run failed\n${last_shown}")
    endif()
    foreach(f demo/config.json demo/tiktoken.model last-run.json)
      if(NOT EXISTS ${models}/${f})
        message(FATAL_ERROR "the installed run wrote no ${models}/${f}\n${last_shown}")
      endif()
    endforeach()
    file(READ ${models}/last-run.json report)
    string(JSON n_generated LENGTH "${report}" generated_ids)
    if(NOT n_generated EQUAL 2)
      message(FATAL_ERROR "the installed run generated ${n_generated} ids, not 2: ${report}")
    endif()
  endforeach()
  if(EXISTS ${xdg}/k3host/models/demo AND EXISTS ${K3I_HOME}/.local/share/k3host/models/demo
     AND NOT EXISTS ${data}/models)
    message(STATUS "installed k3host: demo generated in \$XDG_DATA_HOME/k3host and ~/.local/share/k3host")
  else()
    message(FATAL_ERROR "the demo checkpoint went somewhere else, or something was written in ${data}/models")
  endif()

  file(REMOVE ${marker_preset} ${marker_geometry})
endfunction()
