# k3host chat in a real terminal: tests/cmake/cli_chat_tmux.sh drives it under tmux (typing,
# reading the screen, Ctrl-C, Ctrl-D, --resume, a context that fills). Skipped (exit 77) without tmux.
add_test(NAME "cli-chat: a tmux session chats, stops an answer with Ctrl-C, saves, resumes without prefilling old turns"
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli_chat_tmux.sh $<TARGET_FILE:k3host> ${PROJECT_SOURCE_DIR}
                 ${PROJECT_BINARY_DIR}/test-tmp/cli-chat)
set_tests_properties("cli-chat: a tmux session chats, stops an answer with Ctrl-C, saves, resumes without prefilling old turns"
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
