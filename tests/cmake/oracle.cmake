# Oracle gates (issue 3 item 5): k3host against the independent float64 PyTorch reference in
# tools/reference/, plus the engine's bit-identity gates between decode modes.
#
# Per geometry G (a configs/models/G.yaml that `k3host make-model` knows):
#   oracle-G: make-model         k3host make-model --geometry G --out <build>/models/G
#   oracle-G: reference          k3_reference.py: teacher-forced logits + greedy ids (float64)
#   oracle-G: engine             k3host run with --dump-logits (raw little-endian float32 [rows, vocab])
#   oracle-G: compare            argmax at every row equal, worst relative logits error <= tolerance,
#                                greedy ids equal (tools/reference/compare.py)
#   oracle-G: identical <mode>   engine logits of another decode mode / thread count are
#                                byte-identical to the incremental run's
# The reference and compare steps run /usr/bin/python3 (Debian's python3-torch); without torch
# they exit 77 and ctest reports them SKIPPED, never passed.
#
# The engine command line is assembled in one place (engine_args + variant_<name> below).

set(K3_ORACLE_PYTHON /usr/bin/python3 CACHE FILEPATH "Interpreter with python3-torch for the oracle gates")
set(K3_ORACLE_TOLERANCE 1e-4 CACHE STRING "Max relative logits error, engine vs float64 reference")
set(K3_ORACLE_PIPELINE ${PROJECT_SOURCE_DIR}/configs/default.yaml CACHE FILEPATH
    "Pipeline the oracle engine runs use (model.path and job.* are overridden)")

set(_k3_ref ${PROJECT_SOURCE_DIR}/tools/reference)

# Python self-checks of the reference itself (hand-computed MXFP4/AttnRes/KDA cases,
# incremental == whole-sequence form, MLA latent == expanded).
add_test(NAME "reference: self-checks"
         COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py selftest)
set_tests_properties("reference: self-checks" PROPERTIES SKIP_RETURN_CODE 77)

if(NOT TARGET k3host)
  return()
endif()

# One oracle case. IDS: comma-separated prompt ids (inside every geometry's vocabulary);
# GENERATE: greedy tokens after the prompt.
function(k3_oracle_case geometry ids generate)
  set(model ${PROJECT_BINARY_DIR}/models/${geometry})
  set(out ${PROJECT_BINARY_DIR}/oracle/${geometry})
  set(pfx "oracle-${geometry}")

  add_test(NAME "${pfx}: make-model"
           COMMAND $<TARGET_FILE:k3host> make-model --geometry ${geometry} --out ${model})
  set_tests_properties("${pfx}: make-model" PROPERTIES FIXTURES_SETUP k3_oracle_${geometry}_model)

  add_test(NAME "${pfx}: reference"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py reference ${model}
                   --ids ${ids} --generate ${generate} --dump-routing --out ${out}/reference.json)
  set_tests_properties("${pfx}: reference" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_model FIXTURES_SETUP k3_oracle_${geometry}_ref
    SKIP_RETURN_CODE 77)

  # The engine runs: incremental (the one compared with the reference) and the modes that
  # must reproduce its logits bit for bit.
  set(engine_args --config ${K3_ORACLE_PIPELINE}
                  --set model.path=${model} --set model.generate_if_missing=false
                  --set job.ids=${ids} --set job.max_new_tokens=${generate})
  set(variant_incremental --set job.mode=incremental --set threads=1)
  set(variant_recompute --set job.mode=recompute --set threads=1)
  set(variant_chunk1 --set job.mode=incremental --set job.prefill_chunk=1 --set threads=1)
  set(variant_chunk7 --set job.mode=incremental --set job.prefill_chunk=7 --set threads=1)
  set(variant_threads2 --set job.mode=incremental --set threads=2)
  foreach(name IN ITEMS incremental recompute chunk1 chunk7 threads2)
    add_test(NAME "${pfx}: engine ${name}"
             COMMAND $<TARGET_FILE:k3host> ${engine_args} ${variant_${name}}
                     --out ${out}/engine-${name}.json --dump-logits ${out}/engine-${name}.f32)
    set_tests_properties("${pfx}: engine ${name}" PROPERTIES
      FIXTURES_REQUIRED k3_oracle_${geometry}_model FIXTURES_SETUP k3_oracle_${geometry}_engine)
    if(NOT name STREQUAL "incremental")
      add_test(NAME "${pfx}: identical ${name}"
               COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py identical
                       ${out}/engine-incremental.f32 ${out}/engine-${name}.f32)
      set_tests_properties("${pfx}: identical ${name}" PROPERTIES
        FIXTURES_REQUIRED k3_oracle_${geometry}_engine)
    endif()
  endforeach()

  add_test(NAME "${pfx}: compare"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py compare ${out}/reference.json
                   --logits ${out}/engine-incremental.f32 --report ${out}/engine-incremental.json
                   --tolerance ${K3_ORACLE_TOLERANCE} --out ${out}/compare.json)
  set_tests_properties("${pfx}: compare" PROPERTIES
    FIXTURES_REQUIRED "k3_oracle_${geometry}_ref;k3_oracle_${geometry}_engine"
    SKIP_RETURN_CODE 77)
endfunction()

# 32 fixed prompt ids, all below 256 so every test geometry's vocabulary holds them.
set(K3_ORACLE_IDS "17,4,200,33,91,128,7,250,66,12,180,45,99,3,150,222,58,131,9,77,240,36,110,5,164,88,21,199,140,61,2,115")

# tiny and tiny2 differ in every dimension and in the seed (configs/models/*.yaml).
foreach(geometry IN ITEMS tiny tiny2)
  if(EXISTS ${PROJECT_SOURCE_DIR}/configs/models/${geometry}.yaml)
    k3_oracle_case(${geometry} ${K3_ORACLE_IDS} 16)
  endif()
endforeach()
