# Every JSON file k3host reads (config.json, the index JSON, a shard header,
# tokenizer_config.json, trunk.json, a chat history record) is refused with exit 2 naming it
# when it nests deeper than 64 levels (tests/support/json_depth_files.py).
add_test(NAME "cli-json-depth: a JSON file nested deeper than 64 levels is refused with exit 2 naming it"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/support/json_depth_files.py $<TARGET_FILE:k3host>
                 ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/test-tmp/json-depth)
