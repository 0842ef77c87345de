# The synthetic demo streams at the presets, as the README says it does: `-m demo --config
# laptop` (and ultra) misses experts and reads trunk and expert bytes every decoded token,
# because -m demo sets memory.budgets_for: k3 (the presets' budgets are K3's, scaled to the
# demo's size); with memory.budgets_for=model the same preset holds the 400 MB demo resident.
# Uses the demo checkpoint the cli-doctor tests write (fixture k3_cli_doctor_model), named
# through model.demo_path so nothing is generated in the source tree.
#
# Included by tests/CMakeLists.txt it registers the test; ctest runs it as
#   cmake -DEXE=k3host -DMODEL=<demo checkpoint> -DWORK=<scratch> -P cli_demo_streams.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(VERSION 3.20)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)
  function(k3_report var)
    file(READ "${WORK}/report.json" report)
    string(JSON v ERROR_VARIABLE error GET "${report}" ${ARGN})
    if(error)
      k3_fail("the run report has no ${ARGN}: ${error}")
    endif()
    set(${var} "${v}" PARENT_SCOPE)
  endfunction()
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")

  foreach(preset laptop ultra)
    k3_run(ARGS -m demo --set "model.demo_path=${MODEL}" --config ${preset} -n 6 -t 1 --out "${WORK}/report.json")
    k3_expect_code(0)
    k3_report(requests expert_requests)
    k3_report(hits expert_hits)
    k3_report(per_token decode_bytes_per_token total)
    k3_report(trunk decode_bytes_per_token trunk)
    k3_report(experts decode_bytes_per_token experts)
    math(EXPR misses "${requests} - ${hits}")
    if(misses LESS_EQUAL 0 OR per_token LESS_EQUAL 0 OR trunk LESS_EQUAL 0 OR experts LESS_EQUAL 0)
      k3_fail("-m demo --config ${preset}: ${misses} expert misses of ${requests}, ${per_token} bytes read per decoded token (trunk ${trunk}, experts ${experts}): it does not stream")
    endif()
    k3_report(budgets_for plan budgets_for)
    if(NOT budgets_for STREQUAL "k3")
      k3_fail("the report's plan.budgets_for is '${budgets_for}', not k3")
    endif()
    k3_expect("the plan" err "budgets are k3's \\(memory.budgets_for\\), scaled to this model")
    k3_expect("the summary" out "read: trunk [0-9.]+ [kMG]B, experts [0-9.]+ [kMG]B")
  endforeach()

  # The same preset with the demo's own bytes as budgets: 3 GB and 1 GB hold all of it.
  k3_run(ARGS -m demo --set "model.demo_path=${MODEL}" --config laptop --set memory.budgets_for=model -n 6 -t 1
         --out "${WORK}/report.json")
  k3_expect_code(0)
  k3_report(requests expert_requests)
  k3_report(hits expert_hits)
  if(NOT requests EQUAL hits)
    k3_fail("memory.budgets_for=model: the laptop budgets should hold the demo resident (${hits} hits of ${requests})")
  endif()
  file(REMOVE_RECURSE "${WORK}")
  return()
endif()

add_test(NAME "cli-demo: -m demo streams experts and trunk at the laptop and ultra presets (budgets K3's, scaled)"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DMODEL=${PROJECT_BINARY_DIR}/test-tmp/cli-doctor/demo
                 -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-demo-streams -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties("cli-demo: -m demo streams experts and trunk at the laptop and ultra presets (budgets K3's, scaled)"
                     PROPERTIES FIXTURES_REQUIRED k3_cli_doctor_model)
