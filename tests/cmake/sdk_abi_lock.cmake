# ABI tripwire: sdk/abi.lock must match the SDK headers and K3_PLUGIN_ABI, and
# tools/sdk-abi-lock.sh must compute the same line as this script.
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "sdk: abi.lock matches the SDK headers and K3_PLUGIN_ABI"
           COMMAND ${CMAKE_COMMAND} -DK3_SOURCE_DIR=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_FILE})
  return()
endif()

set(sdk ${K3_SOURCE_DIR}/sdk)
set(regen "run tools/sdk-abi-lock.sh (docs/plugins.md, \"ABI rules\")")

# K3_PLUGIN_ABI as abi.hpp defines it.
file(STRINGS ${sdk}/k3/abi.hpp abi_define REGEX "^#define K3_PLUGIN_ABI [0-9]+u?[ \t]*$")
list(LENGTH abi_define n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "sdk/k3/abi.hpp: expected exactly one '#define K3_PLUGIN_ABI <n>' line, found ${n}")
endif()
string(REGEX REPLACE "^#define K3_PLUGIN_ABI ([0-9]+).*$" "\\1" header_abi "${abi_define}")

# SHA-256 of every header, concatenated in byte order of the names.
file(GLOB headers RELATIVE ${sdk}/k3 ${sdk}/k3/*.hpp)
list(SORT headers)
set(all "")
foreach(h IN LISTS headers)
  file(READ ${sdk}/k3/${h} text)
  string(APPEND all "${text}")
endforeach()
string(SHA256 header_hash "${all}")
set(computed "K3_PLUGIN_ABI=${header_abi} sha256=${header_hash}")

if(NOT EXISTS ${sdk}/abi.lock)
  message(FATAL_ERROR "sdk/abi.lock is missing: ${regen}")
endif()
file(STRINGS ${sdk}/abi.lock lock_lines)
list(GET lock_lines 0 lock)
if(NOT lock MATCHES "^K3_PLUGIN_ABI=([0-9]+) sha256=([0-9a-f]+)$")
  message(FATAL_ERROR "sdk/abi.lock: malformed line '${lock}' (expected K3_PLUGIN_ABI=<n> sha256=<hex>): ${regen}")
endif()
set(lock_abi ${CMAKE_MATCH_1})
set(lock_hash ${CMAKE_MATCH_2})

if(NOT lock_abi STREQUAL header_abi)
  message(FATAL_ERROR "sdk/abi.lock records K3_PLUGIN_ABI=${lock_abi} but sdk/k3/abi.hpp defines ${header_abi}: ${regen}")
endif()
if(NOT lock_hash STREQUAL header_hash)
  message(FATAL_ERROR "sdk/abi.lock: the SDK headers changed (now sha256=${header_hash}, lock has ${lock_hash}). "
                      "If the change alters a layout, a vtable or documented behaviour, bump K3_PLUGIN_ABI in "
                      "sdk/k3/abi.hpp; then ${regen}")
endif()

# The regeneration script must agree with this computation, or the lock it writes would fail here.
execute_process(COMMAND sh ${K3_SOURCE_DIR}/tools/sdk-abi-lock.sh --print
                OUTPUT_VARIABLE script_line ERROR_VARIABLE script_error RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tools/sdk-abi-lock.sh --print failed (${rc}): ${script_error}")
endif()
if(NOT script_line STREQUAL computed)
  message(FATAL_ERROR "tools/sdk-abi-lock.sh prints '${script_line}' but the test computes '${computed}'")
endif()
message(STATUS "sdk/abi.lock ok: ${lock}")
