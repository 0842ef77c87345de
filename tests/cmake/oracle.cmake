# Oracle gates: k3host against the independent float64 PyTorch reference in
# tools/reference/, plus the engine's bit-identity gates between decode modes.
#
# Per geometry G (a configs/models/G.yaml that `k3host make-model` knows):
#   oracle-G: make-model         k3host make-model --geometry G --out <build>/models/G
#   oracle-G: reference          k3_reference.py: teacher-forced logits + greedy ids (float64)
#   oracle-G: engine             k3host run with --dump-logits (raw little-endian float32 [rows, vocab])
#   oracle-G: compare            argmax at every row equal, worst relative logits error <= tolerance,
#                                greedy ids equal (tools/reference/compare.py)
#   oracle-G: identical <mode>   prompt logits and generated ids of another decode mode, chunk
#                                size, thread count, kernel set, or of a save->resume split, are
#                                byte-identical to the incremental run's
# The reference and compare steps run /usr/bin/python3 (Debian's python3-torch); without torch
# they exit 77 and ctest reports them SKIPPED, never passed.
#
# The engine command line is assembled in one place (engine + variant_<name> below).

set(K3_ORACLE_PYTHON /usr/bin/python3 CACHE FILEPATH "Interpreter with python3-torch for the oracle gates")
set(K3_ORACLE_TOLERANCE 1e-4 CACHE STRING "Max relative logits error, engine vs float64 reference")
set(K3_ORACLE_PIPELINE ${PROJECT_SOURCE_DIR}/configs/default.yaml CACHE FILEPATH
    "Pipeline the oracle engine runs use (model.path and job.* are overridden)")

set(_k3_ref ${PROJECT_SOURCE_DIR}/tools/reference)

# Python self-checks of the reference itself (hand-computed MXFP4/AttnRes/KDA cases,
# incremental == whole-sequence form, MLA latent == expanded).
add_test(NAME "reference: self-checks"
         COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py selftest)
# no-sanitizer: Python only, nothing of ours that a sanitizer could watch.
set_tests_properties("reference: self-checks" PROPERTIES SKIP_RETURN_CODE 77 LABELS no-sanitizer)

if(NOT TARGET k3host)
  return()
endif()

# One oracle case. HEAD and TAIL: comma-separated prompt ids (inside every geometry's
# vocabulary); the prompt is HEAD,TAIL, and the save->resume gate splits it there.
# GENERATE: greedy tokens after the prompt.
# A geometry with a shipped checkpoint (data/models/G: the trained demo model) is read from
# there instead of written by make-model.
function(k3_oracle_case geometry head tail generate)
  set(model ${PROJECT_BINARY_DIR}/models/${geometry})
  set(out ${PROJECT_BINARY_DIR}/oracle/${geometry})
  set(pfx "oracle-${geometry}")
  set(ids "${head},${tail}")

  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/data/models/${geometry})
    set(model ${PROJECT_SOURCE_DIR}/data/models/${geometry})
  else()
    add_test(NAME "${pfx}: make-model"
             COMMAND $<TARGET_FILE:k3host> make-model --geometry ${geometry} --out ${model} --force)
    set_tests_properties("${pfx}: make-model" PROPERTIES FIXTURES_SETUP k3_oracle_${geometry}_model)
  endif()
  # k3host writes reports and dumps into existing folders only.
  add_test(NAME "${pfx}: output folder" COMMAND ${CMAKE_COMMAND} -E make_directory ${out})
  set_tests_properties("${pfx}: output folder" PROPERTIES FIXTURES_SETUP k3_oracle_${geometry}_model)

  add_test(NAME "${pfx}: reference"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py reference ${model}
                   --ids ${ids} --generate ${generate} --dump-routing --out ${out}/reference.json)
  set_tests_properties("${pfx}: reference" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_model FIXTURES_SETUP k3_oracle_${geometry}_ref
    SKIP_RETURN_CODE 77)

  # Engine runs: incremental (the one compared with the reference) and the variants that must
  # reproduce its prompt logits and generated ids bit for bit.
  set(engine $<TARGET_FILE:k3host> --config ${K3_ORACLE_PIPELINE}
             --set model.path=${model} --set model.generate_if_missing=false
             --set job.max_new_tokens=${generate} --quiet)
  set(variant_incremental --set job.mode=incremental --set threads=1)
  set(variant_recompute --set job.mode=recompute --set threads=1)
  set(variant_chunk1 --set job.mode=incremental --set job.prefill_chunk=1 --set threads=1)
  set(variant_chunk7 --set job.mode=incremental --set job.prefill_chunk=7 --set threads=1)
  set(variant_threads2 --set job.mode=incremental --set threads=2)
  set(variant_scalar --set job.mode=incremental --set kernels.set=scalar --set threads=1)
  foreach(name IN ITEMS incremental recompute chunk1 chunk7 threads2 scalar)
    add_test(NAME "${pfx}: engine ${name}"
             COMMAND ${engine} ${variant_${name}} --ids ${ids}
                     --out ${out}/engine-${name}.json --dump-logits ${out}/engine-${name}.f32)
    set_tests_properties("${pfx}: engine ${name}" PROPERTIES
      FIXTURES_REQUIRED k3_oracle_${geometry}_model FIXTURES_SETUP k3_oracle_${geometry}_engine)
    if(NOT name STREQUAL "incremental")
      add_test(NAME "${pfx}: identical ${name}"
               COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py identical
                       ${out}/engine-incremental.f32 ${out}/engine-${name}.f32
                       --reports ${out}/engine-incremental.json ${out}/engine-${name}.json)
      set_tests_properties("${pfx}: identical ${name}" PROPERTIES
        FIXTURES_REQUIRED k3_oracle_${geometry}_engine)
    endif()
  endforeach()

  # save -> resume: prefill HEAD and save; resume with TAIL. The resumed run's prompt logits
  # must equal the last rows of the uninterrupted run's, and its generated ids the same.
  add_test(NAME "${pfx}: engine save"
           COMMAND ${engine} --set threads=1 --set job.max_new_tokens=0 --ids ${head}
                   --save-state ${out}/state.k3s --out ${out}/engine-save.json)
  set_tests_properties("${pfx}: engine save" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_model FIXTURES_SETUP k3_oracle_${geometry}_saved)
  add_test(NAME "${pfx}: engine resume"
           COMMAND ${engine} --set threads=1 --ids ${tail} --load-state ${out}/state.k3s
                   --out ${out}/engine-resume.json --dump-logits ${out}/engine-resume.f32)
  set_tests_properties("${pfx}: engine resume" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_saved FIXTURES_SETUP k3_oracle_${geometry}_engine)
  add_test(NAME "${pfx}: identical resume"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py identical
                   ${out}/engine-incremental.f32 ${out}/engine-resume.f32 --tail
                   --reports ${out}/engine-incremental.json ${out}/engine-resume.json)
  set_tests_properties("${pfx}: identical resume" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_engine)

  add_test(NAME "${pfx}: compare"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py compare ${out}/reference.json
                   --logits ${out}/engine-incremental.f32 --report ${out}/engine-incremental.json
                   --tolerance ${K3_ORACLE_TOLERANCE} --out ${out}/compare.json)
  set_tests_properties("${pfx}: compare" PROPERTIES
    FIXTURES_REQUIRED "k3_oracle_${geometry}_ref;k3_oracle_${geometry}_engine"
    SKIP_RETURN_CODE 77)
endfunction()

# The same geometry written in another dtype mix (make-model --dtypes): the reference reads
# it (F32 where it is F32) and must agree, and the engine's logits and ids must be
# byte-identical to the geometry's own mix (the release mix), since the values are the same
# numbers. Only the incremental run: the C++ matrix covers the other variants on tiny.
function(k3_oracle_mix_case geometry mix head tail generate)
  set(model ${PROJECT_BINARY_DIR}/models/${geometry}-${mix})
  set(out ${PROJECT_BINARY_DIR}/oracle/${geometry}-${mix})
  set(base ${PROJECT_BINARY_DIR}/oracle/${geometry})
  set(pfx "oracle-${geometry}-${mix}")
  set(ids "${head},${tail}")
  add_test(NAME "${pfx}: make-model"
           COMMAND $<TARGET_FILE:k3host> make-model --geometry ${geometry} --dtypes ${mix} --out ${model} --force)
  add_test(NAME "${pfx}: output folder" COMMAND ${CMAKE_COMMAND} -E make_directory ${out})
  set_tests_properties("${pfx}: make-model" "${pfx}: output folder" PROPERTIES
    FIXTURES_SETUP k3_oracle_${geometry}_${mix}_model)
  add_test(NAME "${pfx}: reference"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py reference ${model}
                   --ids ${ids} --generate ${generate} --out ${out}/reference.json)
  set_tests_properties("${pfx}: reference" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_${mix}_model FIXTURES_SETUP k3_oracle_${geometry}_${mix}_ref
    SKIP_RETURN_CODE 77)
  add_test(NAME "${pfx}: engine incremental"
           COMMAND $<TARGET_FILE:k3host> --config ${K3_ORACLE_PIPELINE}
                   --set model.path=${model} --set model.generate_if_missing=false
                   --set job.max_new_tokens=${generate} --quiet --set job.mode=incremental --set threads=1
                   --ids ${ids} --out ${out}/engine-incremental.json --dump-logits ${out}/engine-incremental.f32)
  set_tests_properties("${pfx}: engine incremental" PROPERTIES
    FIXTURES_REQUIRED k3_oracle_${geometry}_${mix}_model FIXTURES_SETUP k3_oracle_${geometry}_${mix}_engine)
  add_test(NAME "${pfx}: compare"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py compare ${out}/reference.json
                   --logits ${out}/engine-incremental.f32 --report ${out}/engine-incremental.json
                   --tolerance ${K3_ORACLE_TOLERANCE} --out ${out}/compare.json)
  set_tests_properties("${pfx}: compare" PROPERTIES
    FIXTURES_REQUIRED "k3_oracle_${geometry}_${mix}_ref;k3_oracle_${geometry}_${mix}_engine"
    SKIP_RETURN_CODE 77)
  add_test(NAME "${pfx}: identical to the release mix"
           COMMAND ${K3_ORACLE_PYTHON} ${_k3_ref}/oracle_test.py identical
                   ${base}/engine-incremental.f32 ${out}/engine-incremental.f32
                   --reports ${base}/engine-incremental.json ${out}/engine-incremental.json)
  set_tests_properties("${pfx}: identical to the release mix" PROPERTIES
    FIXTURES_REQUIRED "k3_oracle_${geometry}_engine;k3_oracle_${geometry}_${mix}_engine")
endfunction()

# 32 fixed prompt ids, all below 256 so every test geometry's vocabulary holds them.
set(K3_ORACLE_IDS_HEAD "17,4,200,33,91,128,7,250,66,12,180,45,99,3,150,222")
set(K3_ORACLE_IDS_TAIL "58,131,9,77,240,36,110,5,164,88,21,199,140,61,2,115")

# tiny and tiny2 differ in every dimension and in the seed; tiny-top1 routes each token to one
# expert, where the router does not renormalise (configs/models/*.yaml).
foreach(geometry IN ITEMS tiny tiny2 tiny-top1)
  if(EXISTS ${PROJECT_SOURCE_DIR}/configs/models/${geometry}.yaml)
    k3_oracle_case(${geometry} ${K3_ORACLE_IDS_HEAD} ${K3_ORACLE_IDS_TAIL} 16)
  endif()
endforeach()
# The trained demo model (docs/demo-model.md), shipped in data/models/fortune: its prompts
# start with [BOS] (id 3072) as in training, and its greedy continuation is real text.
k3_oracle_case(fortune "3072,${K3_ORACLE_IDS_HEAD}" ${K3_ORACLE_IDS_TAIL} 24)
# tiny's other dtype mixes (configs/models/tiny.yaml writes the release mix): compact (BF16
# everywhere) and f32 (F32 everywhere, matrices included).
foreach(mix IN ITEMS compact f32)
  k3_oracle_mix_case(tiny ${mix} ${K3_ORACLE_IDS_HEAD} ${K3_ORACLE_IDS_TAIL} 16)
endforeach()
