# Writes OUT = `#define K3_BUILD_COMMIT "<git describe>"` for `k3host --version`, run at every
# build (not only at configure time, which would go stale after the next commit). OUT is
# rewritten only when the text changes, so an unchanged commit rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DOUT=... -P write_build_commit.cmake
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty=-modified --abbrev=12
                RESULT_VARIABLE rc OUTPUT_VARIABLE commit ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown (not built from a git checkout)")
endif()
set(text "#define K3_BUILD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
