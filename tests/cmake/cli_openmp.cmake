# CLI tests of the OpenMP wait policy (docs/benchmarks.md, "OpenMP wait policy";
# core/cli/openmp_reexec.cpp). With nothing set, k3host sets OMP_WAIT_POLICY=passive and
# re-executes itself once: the run report, the -v log and `doctor` say "passive, chosen by
# k3host", and libgomp itself (OMP_DISPLAY_ENV=verbose) shows a second start with a spin
# count of 0. An explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT of the user is kept: one start,
# the user's value, "set by the user". The generated ids are the same either way.
# The job runs on the tiny model, generated once into the scratch folder.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DWORK=<scratch dir> -DCASE=<case> -P cli_openmp.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(VERSION 3.20)
  # k3_run, k3_fail, k3_expect: every wait-policy variable cleared, then a run's ENV.
  set(K3_RUN_UNSET OMP_WAIT_POLICY GOMP_SPINCOUNT KMP_BLOCKTIME K3_OMP_WAIT_POLICY_CHOSEN OMP_DISPLAY_ENV)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)
  # k3_report(POLICY SET_BY IDS_VAR): the run report's openmp section, and its generated ids.
  function(k3_report policy set_by ids_var)
    file(READ "${WORK}/report.json" report)
    string(JSON p GET "${report}" openmp wait_policy)
    string(JSON s GET "${report}" openmp set_by)
    if(NOT p STREQUAL policy OR NOT s STREQUAL set_by)
      k3_fail("the report says wait policy '${p}' set by '${s}', expected '${policy}' set by '${set_by}'")
    endif()
    string(JSON ids GET "${report}" generated_ids)
    set(${ids_var} "${ids}" PARENT_SCOPE)
  endfunction()
  # k3_runtime_starts(N LAST_SPIN): libgomp printed N environment blocks (one per start of
  # the program) and the last one's spin count is LAST_SPIN. Skipped for another runtime.
  function(k3_runtime_starts n spin)
    if(NOT err MATCHES "GOMP_SPINCOUNT = '")
      return()  # not libgomp: it does not print GOMP_SPINCOUNT
    endif()
    string(REGEX MATCHALL "OPENMP DISPLAY ENVIRONMENT BEGIN" blocks "${err}")
    list(LENGTH blocks got)
    if(NOT got EQUAL n)
      k3_fail("the OpenMP runtime started ${got} times, expected ${n}")
    endif()
    string(REGEX MATCHALL "GOMP_SPINCOUNT = '[0-9]+'" spins "${err}")
    list(GET spins -1 last)
    if(NOT last STREQUAL "GOMP_SPINCOUNT = '${spin}'")
      k3_fail("the last start of the runtime has ${last}, expected ${spin}")
    endif()
  endfunction()

  set(job --config "${SRC}/configs/default.yaml" --set "model.path=${WORK}/model" --set model.generate_if_missing=false
      --set job.max_new_tokens=4 --set threads=2 --ids 5,17,99 --out "${WORK}/report.json")

  if(CASE STREQUAL "model")
    file(REMOVE_RECURSE "${WORK}")
    file(MAKE_DIRECTORY "${WORK}")
    k3_run(ARGS make-model -g tiny -o "${WORK}/model")
    if(NOT code EQUAL 0)
      k3_fail("make-model failed")
    endif()
  elseif(CASE STREQUAL "policy")
    # Nothing set: k3host's choice, applied by one re-execution.
    k3_run(ENV OMP_DISPLAY_ENV=verbose ARGS ${job} -v)
    if(NOT code EQUAL 0)
      k3_fail("the run failed")
    endif()
    k3_expect("-v stderr" err "\\[k3host\\] debug: OpenMP wait policy passive, chosen by k3host")
    k3_report(passive k3host ids_k3host)
    k3_runtime_starts(2 0)

    # The user's OMP_WAIT_POLICY: kept, one start.
    k3_run(ENV OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose ARGS ${job} -v)
    if(NOT code EQUAL 0)
      k3_fail("the run failed")
    endif()
    k3_expect("-v stderr" err "\\[k3host\\] debug: OpenMP wait policy active, set by the user \\(OMP_WAIT_POLICY=active")
    k3_report(active user ids_active)
    k3_runtime_starts(1 30000000000)

    # The user's GOMP_SPINCOUNT alone: kept too.
    k3_run(ENV GOMP_SPINCOUNT=1000 OMP_DISPLAY_ENV=verbose ARGS ${job})
    if(NOT code EQUAL 0)
      k3_fail("the run failed")
    endif()
    k3_report("spin GOMP_SPINCOUNT=1000" user ids_spin)
    k3_runtime_starts(1 1000)

    if(NOT ids_k3host STREQUAL ids_active OR NOT ids_k3host STREQUAL ids_spin)
      k3_fail("the wait policy changed the output: ${ids_k3host} / ${ids_active} / ${ids_spin}")
    endif()

    # doctor says the same.
    k3_run(ENV OMP_WAIT_POLICY=ACTIVE ARGS doctor --config "${SRC}/configs/default.yaml" --set "model.path=${WORK}/model"
           --seconds 0.2 --no-full-model --presets-dir "${SRC}/presets" -o json)
    string(JSON s GET "${out}" openmp set_by)
    string(JSON p GET "${out}" openmp wait_policy)
    if(NOT s STREQUAL "user" OR NOT p STREQUAL "active")
      k3_fail("doctor: '${p}' set by '${s}', expected the user's active")
    endif()
  else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
  endif()
  return()
endif()

set(_k3_omp_work ${PROJECT_BINARY_DIR}/test-tmp/cli-openmp)
add_test(NAME "cli-openmp: make the tiny model"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${_k3_omp_work}
                 -DCASE=model -P ${CMAKE_CURRENT_LIST_FILE}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties("cli-openmp: make the tiny model" PROPERTIES FIXTURES_SETUP k3_cli_openmp_model)
add_test(NAME "cli-openmp: k3host applies passive once unless the user chose; the ids do not change"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${_k3_omp_work}
                 -DCASE=policy -P ${CMAKE_CURRENT_LIST_FILE}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties("cli-openmp: k3host applies passive once unless the user chose; the ids do not change"
                     PROPERTIES FIXTURES_REQUIRED k3_cli_openmp_model)
# Re-executing itself keeps the process's name (not "exe"), for ps, top, pgrep -x and ss -p.
add_test(NAME "cli-openmp: the re-executed process is still called k3host (/proc/PID/comm, ps, pgrep -x)"
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/process_name.sh $<TARGET_FILE:k3host> ${_k3_omp_work}-name
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
