# The README's main command: `k3host --config laptop` from an empty folder runs the trained
# model the repository ships (data/models/fortune) and prints English, and `-m demo` selects
# the synthetic demo checkpoint with its own geometry (tests/support/default_model_test.py).
add_test(NAME "main: --config laptop runs the shipped fortune model and prints English; -m demo selects the synthetic one"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/support/default_model_test.py $<TARGET_FILE:k3host>
                 ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/test-tmp/default-model)
