# The neon kernel set on an x86-64 build machine: cross-compiled with Debian's aarch64
# toolchain and compared with the scalar reference under qemu-user
# (tests/unit/kernels_simd/neon_qemu). Skipped (exit 77) when the toolchain or qemu is missing.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  add_test(NAME "kernels_simd: neon equals scalar bit for bit under qemu-aarch64"
           COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${PROJECT_BINARY_DIR}/neon-qemu
                   -P ${PROJECT_SOURCE_DIR}/tests/unit/kernels_simd/neon_qemu/run_neon_qemu.cmake)
  set_tests_properties("kernels_simd: neon equals scalar bit for bit under qemu-aarch64" PROPERTIES
                       SKIP_REGULAR_EXPRESSION "SKIP: needs" TIMEOUT 300
                       # no-sanitizer: it cross-builds its own aarch64 binary (no sanitizer
                       # runtime under qemu-user), so a sanitizer build would rerun it unchanged.
                       LABELS no-sanitizer)
endif()
