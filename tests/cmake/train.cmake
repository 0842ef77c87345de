# The demo model's training recipe (tools/train, docs/demo-model.md): its Python self-checks
# (the batched training forward equals the float64 reference's, MXFP4 rounding, the export
# holds what training holds, the perplexity windows, the BPE) and that its tokenizer gives
# the ids k3host's tiktoken plugin gives on the held-out text. Skipped (77) when
# /usr/bin/python3 lacks torch, numpy or regex (tools/install-deps.sh --with-train).
add_test(NAME "train: self-checks, and the recipe's tokenizer gives k3host's ids"
         COMMAND sh -c "/usr/bin/python3 -c 'import importlib.util as u, sys; sys.exit(77 if any(u.find_spec(m) is None for m in (\"torch\", \"numpy\", \"regex\")) else 0)' || exit $?; /usr/bin/python3 -m unittest -v test_train"
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tools/train)
set_tests_properties("train: self-checks, and the recipe's tokenizer gives k3host's ids" PROPERTIES
  SKIP_RETURN_CODE 77
  ENVIRONMENT "K3HOST=$<TARGET_FILE:k3host>;K3_MODEL=${PROJECT_SOURCE_DIR}/data/models/fortune")
